// conv2d on cuDNN: descriptors and the forward / backward-data / backward-filter algorithms are
// chosen once, in the constructor (per batch size), with cudnnGet*Algorithm_v7 heuristics:
//   - strict fp32: FMA math on the convolution descriptor, tensor-core (TF32) results skipped;
//     tf32: default math (cuDNN may use TF32 tensor cores);
//   - ctx.deterministic: only algorithms cuDNN reports as deterministic;
//   - the algorithm's scratch comes from the kernel's workspace slice (our arena), at most
//     kMaxScratch bytes per layer, so it counts against --mem-limit.
// Asymmetric padding (TensorFlow "same" with an even kernel or a stride) cannot be described to
// cuDNN: the input is then padded explicitly into the workspace (pad2d.cu) and convolved with no
// padding; backward-data goes to that buffer and is cropped into dx.
// Bias add and bias gradient are own kernels (bias.cu). Backward overwrites dW and db.
// params: [W | pad to 64 floats | b], as Model lays the arena out.
//   x: (B, C, H, W)  W: (F, C, kh, kw)  b: (F)  y: (B, F, OH, OW)
//   workspace: [padded x (B, C, H+pt+pb, W+pl+pr), only when asymmetric] [cuDNN scratch]
#include <algorithm>

#include "kernels/cuda/bias.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cudnn_util.h"
#include "kernels/cuda/pad2d.cuh"
#include "lib/layers/conv2d.h"

namespace trainer {
namespace {

using cuda::ConvDesc;
using cuda::FilterDesc;
using cuda::TensorDesc;

constexpr size_t kMaxScratch = size_t(64) << 20;
constexpr int kMaxAlgos = 16;

// The first acceptable algorithm of cuDNN's ranked list and its scratch size.
template <class Perf, class Algo, class WsFn>
Algo pick(const Perf* perf, int count, bool deterministic, bool strict, size_t max_ws, WsFn ws_of,
          size_t* ws, const std::string& what) {
  for (int i = 0; i < count; ++i) {
    const Perf& p = perf[i];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    if (deterministic && p.determinism != CUDNN_DETERMINISTIC) continue;
    if (strict && (p.mathType == CUDNN_TENSOR_OP_MATH ||
                   p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
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

class Conv2dCuda : public LayerKernel {
 public:
  Conv2dCuda(const Conv2d& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)), bias_(l.use_bias), batch_(ctx.batch), filters_(l.filters) {
    const Shape& in = l.input_shape();
    const Shape& out = l.output_shape();
    out_spatial_ = out[1] * out[2];
    bias_offset_ = param_slot_floats(l.filters * in[0] * l.kh * l.kw);
    asym_ = l.wh.pad_begin != l.wh.pad_end || l.ww.pad_begin != l.ww.pad_end;
    pad_ = cuda::PadGeometry{ctx.batch * in[0], in[1], in[2], l.wh.pad_begin, l.wh.pad_end,
                             l.ww.pad_begin, l.ww.pad_end};
    const int64_t xh = asym_ ? pad_.ph() : in[1], xw = asym_ ? pad_.pw() : in[2];
    const int pad_h = asym_ ? 0 : int(l.wh.pad_begin), pad_w = asym_ ? 0 : int(l.ww.pad_begin);
    cuda::set_nchw(x_desc_, ctx.batch, in[0], xh, xw);
    cuda::set_nchw(y_desc_, ctx.batch, out[0], out[1], out[2]);
    CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_desc_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                           int(l.filters), int(in[0]), int(l.kh), int(l.kw)));
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_desc_, pad_h, pad_w, int(l.sh), int(l.sw), 1,
                                                1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    const bool strict = ctx.math == MathMode::strict_fp32;
    CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, strict ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH));
    int n, c, h, w;
    CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv_desc_, x_desc_, w_desc_, &n, &c, &h, &w));
    if (n != ctx.batch || c != out[0] || h != out[1] || w != out[2])
      throw InternalError("conv2d '" + l.name() + "': cuDNN's output shape differs from " +
                          out.batched_str());
    choose_algorithms(l.name(), ctx.deterministic, strict);
    if (asym_) padded_bytes_ = align_up(size_t(pad_.planes * pad_.ph() * pad_.pw()) * sizeof(float));
  }

  size_t workspace_bytes() const override { return padded_bytes_ + scratch_bytes_; }

  void bind(float* params, float* grads, float*, void* ws) override {
    w_ = params;
    dw_ = grads;
    if (bias_) {
      b_ = params + bias_offset_;
      db_ = grads + bias_offset_;
    }
    char* base = static_cast<char*>(ws);
    xpad_ = asym_ ? reinterpret_cast<float*>(base) : nullptr;
    scratch_ = scratch_bytes_ ? base + padded_bytes_ : nullptr;
  }

  void forward(const float* x, float* y, bool) override {
    const float* xin = padded_input(x);
    CUDNN_CHECK(cudnnConvolutionForward(be_.cudnn(), &kOne, x_desc_, xin, w_desc_, w_, conv_desc_,
                                        fwd_algo_, scratch_, fwd_ws_, &kZero, y_desc_, y));
    if (bias_) cuda::launch_bias_add(y, b_, batch_, filters_, out_spatial_, be_.stream());
  }

  void backward(const float* x, const float*, const float* dy, float* dx) override {
    const float* xin = padded_input(x);
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(be_.cudnn(), &kOne, x_desc_, xin, y_desc_, dy,
                                               conv_desc_, bwd_filter_algo_, scratch_,
                                               bwd_filter_ws_, &kZero, w_desc_, dw_));
    if (bias_) cuda::launch_bias_grad(dy, db_, batch_, filters_, out_spatial_, be_.stream());
    if (!dx) return;
    // With explicit padding the padded input is no longer needed: its buffer takes d(padded x).
    float* dxin = asym_ ? xpad_ : dx;
    CUDNN_CHECK(cudnnConvolutionBackwardData(be_.cudnn(), &kOne, w_desc_, w_, y_desc_, dy,
                                             conv_desc_, bwd_data_algo_, scratch_, bwd_data_ws_,
                                             &kZero, x_desc_, dxin));
    if (asym_) cuda::launch_crop2d(pad_, xpad_, dx, be_.stream());
  }

 private:
  // Pads x into the workspace when the padding is asymmetric (every call: backward does not rely
  // on what forward left there).
  const float* padded_input(const float* x) {
    if (!asym_) return x;
    cuda::launch_pad2d(pad_, x, xpad_, be_.stream());
    return xpad_;
  }

  void choose_algorithms(const std::string& name, bool deterministic, bool strict) {
    const cudnnHandle_t h = be_.cudnn();
    const std::string what = "conv2d '" + name + "'";
    const size_t max_ws = be_.allocator().cap_bytes()
                              ? std::min(kMaxScratch, be_.allocator().cap_bytes() / 16)
                              : kMaxScratch;
    int count = 0;
    cudnnConvolutionFwdAlgoPerf_t fwd[kMaxAlgos];
    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, x_desc_, w_desc_, conv_desc_, y_desc_,
                                                       kMaxAlgos, &count, fwd));
    fwd_algo_ = pick<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
        fwd, count, deterministic, strict, max_ws,
        [&](cudnnConvolutionFwdAlgo_t a, size_t* b) {
          return cudnnGetConvolutionForwardWorkspaceSize(h, x_desc_, w_desc_, conv_desc_, y_desc_,
                                                         a, b);
        },
        &fwd_ws_, what + " forward");
    cudnnConvolutionBwdDataAlgoPerf_t bd[kMaxAlgos];
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w_desc_, y_desc_, conv_desc_,
                                                            x_desc_, kMaxAlgos, &count, bd));
    bwd_data_algo_ = pick<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
        bd, count, deterministic, strict, max_ws,
        [&](cudnnConvolutionBwdDataAlgo_t a, size_t* b) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(h, w_desc_, y_desc_, conv_desc_,
                                                              x_desc_, a, b);
        },
        &bwd_data_ws_, what + " backward-data");
    cudnnConvolutionBwdFilterAlgoPerf_t bf[kMaxAlgos];
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x_desc_, y_desc_, conv_desc_,
                                                              w_desc_, kMaxAlgos, &count, bf));
    bwd_filter_algo_ = pick<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
        bf, count, deterministic, strict, max_ws,
        [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* b) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x_desc_, y_desc_, conv_desc_,
                                                                w_desc_, a, b);
        },
        &bwd_filter_ws_, what + " backward-filter");
    scratch_bytes_ = align_up(std::max({fwd_ws_, bwd_data_ws_, bwd_filter_ws_}));  // 0 stays 0
  }

  static constexpr float kOne = 1.f, kZero = 0.f;

  CudaBackend& be_;
  bool bias_, asym_ = false;
  int64_t batch_, filters_, out_spatial_ = 0, bias_offset_ = 0;
  cuda::PadGeometry pad_;
  TensorDesc x_desc_, y_desc_;
  FilterDesc w_desc_;
  ConvDesc conv_desc_;
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo_{};
  size_t fwd_ws_ = 0, bwd_data_ws_ = 0, bwd_filter_ws_ = 0, scratch_bytes_ = 0, padded_bytes_ = 0;
  const float *w_ = nullptr, *b_ = nullptr;
  float *dw_ = nullptr, *db_ = nullptr, *xpad_ = nullptr;
  void* scratch_ = nullptr;
};

}  // namespace

std::unique_ptr<LayerKernel> make_conv2d_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<Conv2dCuda>(static_cast<const Conv2d&>(l), ctx);
}

}  // namespace trainer
