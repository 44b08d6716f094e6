// CudnnConv and the conv layer kernel: see cudnn_conv.h.
#include "kernels/cuda/cudnn_conv.h"

#include <algorithm>

#include "kernels/cuda/bias.cuh"
#include "lib/memory/allocator.h"

namespace trainer::cuda {
namespace {

constexpr size_t kMaxScratch = size_t(64) << 20;
constexpr int kMaxAlgos = 16;
constexpr float kOne = 1.f, kZero = 0.f;

// The first acceptable algorithm of cuDNN's ranked list and its scratch size.
template <class Perf, class Algo, class WsFn>
Algo pick(const Perf* perf, int count, bool deterministic, bool strict, size_t max_ws, WsFn ws_of, size_t* ws,
          const std::string& what) {
  for (int i = 0; i < count; ++i) {
    const Perf& p = perf[i];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    if (deterministic && p.determinism != CUDNN_DETERMINISTIC) continue;
    if (strict && (p.mathType == CUDNN_TENSOR_OP_MATH || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
      continue;
    size_t bytes = 0;
    if (ws_of(p.algo, &bytes) != CUDNN_STATUS_SUCCESS || bytes > max_ws) continue;
    *ws = bytes;
    return p.algo;
  }
  throw RuntimeError(what + ": cuDNN offers no usable algorithm" +
                     (deterministic ? " that is deterministic (--deterministic)" : std::string()) +
                     " within " + format_bytes(max_ws) + " of scratch");
}

class CudnnConvLayer : public LayerKernel {
 public:
  CudnnConvLayer(const ConvShape& s, bool bias, const KernelContext& ctx, const std::string& what)
      : be_(cuda_of(ctx)),
        bias_(bias),
        batch_(s.batch),
        filters_(s.filters),
        out_spatial_(s.oh * s.ow),
        conv_(be_, s, ctx, what) {}

  size_t workspace_bytes() const override { return conv_.workspace_bytes(); }

  void bind(const KernelBinding& b) override {
    a_ = BoundActivations(b);
    w_ = b.param(0).f32();
    dw_ = b.grad(0).f32();
    if (bias_) {
      b_ = b.param(1).f32();
      db_ = b.grad(1).f32();
    }
    conv_.bind(b.workspace);
  }

  void forward(bool) override {
    const float* x = a_.x;
    float* y = a_.y;
    conv_.forward(x, w_, y);
    if (bias_) launch_bias_add(y, b_, batch_, filters_, out_spatial_, be_.stream());
  }

  void backward() override {
    const float *x = a_.x, *dy = a_.dy;
    float* dx = a_.dx;
    conv_.backward(x, w_, dy, dw_, dx);
    if (bias_) launch_bias_grad(dy, db_, batch_, filters_, out_spatial_, be_.stream());
  }

 private:
  BoundActivations a_;
  CudaBackend& be_;
  bool bias_;
  int64_t batch_, filters_, out_spatial_;
  CudnnConv conv_;
  const float *w_ = nullptr, *b_ = nullptr;
  float *dw_ = nullptr, *db_ = nullptr;
};

}  // namespace

std::unique_ptr<LayerKernel> make_cudnn_conv_layer(const ConvShape& s, bool bias, const KernelContext& ctx,
                                                   const std::string& what) {
  return std::make_unique<CudnnConvLayer>(s, bias, ctx, what);
}

CudnnConv::CudnnConv(CudaBackend& be, const ConvShape& s, const KernelContext& ctx, const std::string& what)
    : be_(be) {
  asym_ = s.pad_top != s.pad_bottom || s.pad_left != s.pad_right;
  pad_ = PadGeometry{s.batch * s.channels, s.h, s.w, s.pad_top, s.pad_bottom, s.pad_left, s.pad_right};
  const int64_t xh = asym_ ? pad_.ph() : s.h, xw = asym_ ? pad_.pw() : s.w;
  const int pad_h = asym_ ? 0 : int(s.pad_top), pad_w = asym_ ? 0 : int(s.pad_left);
  set_nchw(x_desc_, s.batch, s.channels, xh, xw);
  set_nchw(y_desc_, s.batch, s.filters, s.oh, s.ow);
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_desc_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, int(s.filters),
                                         int(s.channels / s.groups), int(s.kh), int(s.kw)));
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_desc_, pad_h, pad_w, int(s.sh), int(s.sw), 1, 1,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv_desc_, int(s.groups)));
  const bool strict = ctx.math == MathMode::strict_fp32;
  CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, strict ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH));
  int n, c, h, w;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv_desc_, x_desc_, w_desc_, &n, &c, &h, &w));
  if (n != s.batch || c != s.filters || h != s.oh || w != s.ow)
    throw InternalError(what + ": cuDNN's output shape (" + std::to_string(n) + ", " + std::to_string(c) +
                        ", " + std::to_string(h) + ", " + std::to_string(w) + ") differs from the layer's");
  choose_algorithms(what, ctx.deterministic, strict);
  if (asym_) padded_bytes_ = align_up(size_t(pad_.planes * pad_.ph() * pad_.pw()) * sizeof(float));
}

void CudnnConv::bind(void* workspace) {
  char* base = static_cast<char*>(workspace);
  xpad_ = asym_ ? reinterpret_cast<float*>(base) : nullptr;
  scratch_ = scratch_bytes_ ? base + padded_bytes_ : nullptr;
}

void CudnnConv::forward(const float* x, const float* w, float* y) {
  const float* xin = padded_input(x);
  CUDNN_CHECK(cudnnConvolutionForward(be_.cudnn(), &kOne, x_desc_, xin, w_desc_, w, conv_desc_, fwd_algo_,
                                      scratch_, fwd_ws_, &kZero, y_desc_, y));
}

void CudnnConv::backward(const float* x, const float* w, const float* dy, float* dw, float* dx) {
  const float* xin = padded_input(x);
  CUDNN_CHECK(cudnnConvolutionBackwardFilter(be_.cudnn(), &kOne, x_desc_, xin, y_desc_, dy, conv_desc_,
                                             bwd_filter_algo_, scratch_, bwd_filter_ws_, &kZero, w_desc_,
                                             dw));
  if (!dx) return;
  // With explicit padding the padded input is no longer needed: its buffer takes d(padded x).
  float* dxin = asym_ ? xpad_ : dx;
  CUDNN_CHECK(cudnnConvolutionBackwardData(be_.cudnn(), &kOne, w_desc_, w, y_desc_, dy, conv_desc_,
                                           bwd_data_algo_, scratch_, bwd_data_ws_, &kZero, x_desc_, dxin));
  if (asym_) launch_crop2d(pad_, xpad_, dx, be_.stream());
}

// Pads x into the workspace when the padding is asymmetric (every call: backward does not rely
// on what forward left there).
const float* CudnnConv::padded_input(const float* x) {
  if (!asym_) return x;
  launch_pad2d(pad_, x, xpad_, be_.stream());
  return xpad_;
}

void CudnnConv::choose_algorithms(const std::string& what, bool deterministic, bool strict) {
  const cudnnHandle_t h = be_.cudnn();
  const size_t max_ws =
      be_.allocator().cap_bytes() ? std::min(kMaxScratch, be_.allocator().cap_bytes() / 16) : kMaxScratch;
  int count = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[kMaxAlgos];
  CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, x_desc_, w_desc_, conv_desc_, y_desc_, kMaxAlgos,
                                                     &count, fwd));
  fwd_algo_ = pick<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
      fwd, count, deterministic, strict, max_ws,
      [&](cudnnConvolutionFwdAlgo_t a, size_t* b) {
        return cudnnGetConvolutionForwardWorkspaceSize(h, x_desc_, w_desc_, conv_desc_, y_desc_, a, b);
      },
      &fwd_ws_, what + " forward");
  cudnnConvolutionBwdDataAlgoPerf_t bd[kMaxAlgos];
  CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w_desc_, y_desc_, conv_desc_, x_desc_, kMaxAlgos,
                                                          &count, bd));
  bwd_data_algo_ = pick<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
      bd, count, deterministic, strict, max_ws,
      [&](cudnnConvolutionBwdDataAlgo_t a, size_t* b) {
        return cudnnGetConvolutionBackwardDataWorkspaceSize(h, w_desc_, y_desc_, conv_desc_, x_desc_, a, b);
      },
      &bwd_data_ws_, what + " backward-data");
  cudnnConvolutionBwdFilterAlgoPerf_t bf[kMaxAlgos];
  CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x_desc_, y_desc_, conv_desc_, w_desc_,
                                                            kMaxAlgos, &count, bf));
  bwd_filter_algo_ = pick<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
      bf, count, deterministic, strict, max_ws,
      [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* b) {
        return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x_desc_, y_desc_, conv_desc_, w_desc_, a, b);
      },
      &bwd_filter_ws_, what + " backward-filter");
  scratch_bytes_ = align_up(std::max({fwd_ws_, bwd_data_ws_, bwd_filter_ws_}));  // 0 stays 0
}

}  // namespace trainer::cuda
