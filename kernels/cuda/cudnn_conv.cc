// CudnnConv and the conv layer kernel: see cudnn_conv.h.
#include "kernels/cuda/cudnn_conv.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "kernels/cuda/algo_disk_cache.h"
#include "kernels/cuda/bias.cuh"
#include "kernels/cuda/channels_last.h"
#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/eltwise.cuh"
#include "kernels/cuda/graph_timer.h"
#include "kernels/cuda/measure_buffers.h"
#include "lib/core/elapsed.h"
#include "lib/memory/allocator.h"

namespace trainer::cuda {
namespace {

// cuDNN scratch per algorithm: at most 256 MiB (1/8 of a --mem-limit cap). Convolution
// workspaces are transient, so the executor gives all of them one shared region.
constexpr size_t kMaxScratch = size_t(256) << 20;
size_t max_scratch(const Allocator& a) {
  return a.cap_bytes() ? std::min(kMaxScratch, a.cap_bytes() / 8) : kMaxScratch;
}
constexpr int kMaxAlgos = 16;
constexpr float kOne = 1.f, kZero = 0.f;
constexpr double kDirectMaxMacs = 8.6e9;  // 2^33: see CudnnConv::CudnnConv

// The first acceptable algorithm of cuDNN's ranked list (measured or heuristic), its math type
// and its scratch size with that math type.
template <class Perf, class Algo, class WsFn>
Algo pick(const Perf* perf, int count, bool deterministic, bool strict, size_t max_ws, WsFn ws_of, size_t* ws,
          cudnnMathType_t* math, const std::string& what) {
  for (int i = 0; i < count; ++i) {
    const Perf& p = perf[i];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    if (deterministic && p.determinism != CUDNN_DETERMINISTIC) continue;
    if (strict && (p.mathType == CUDNN_TENSOR_OP_MATH || p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
      continue;
    size_t bytes = 0;
    if (ws_of(p.algo, p.mathType, &bytes) != CUDNN_STATUS_SUCCESS || bytes > max_ws) continue;
    *ws = bytes;
    *math = p.mathType;
    return p.algo;
  }
  throw RuntimeError(what + ": cuDNN offers no usable algorithm" +
                     (deterministic ? " that is deterministic (--deterministic)" : std::string()) +
                     " within " + format_bytes(max_ws) + " of scratch");
}

ConvShape with_epilogue(ConvShape s, bool bias, bool relu) {
  s.bias = bias;
  s.relu = relu;
  return s;
}

// The convolution runs in its core layout (CudnnConv::nhwc); a plain input is transposed into the
// workspace (and dx computed there, then transposed back), and the output goes through an
// OutputEdge when the consumer needs plain NCHW.
class CudnnConvLayer : public LayerKernel {
 public:
  CudnnConvLayer(const ConvShape& s, bool bias, const KernelContext& ctx, const std::string& what)
      : be_(cuda_of(ctx)),
        bias_(bias && !ctx.bias_to_batchnorm),  // else the batchnorm after it takes the bias
        relu_(ctx.fused_relu),
        batch_(s.batch),
        filters_(s.filters),
        out_spatial_(s.oh * s.ow),
        in_({s.batch, s.channels, s.h, s.w}),
        conv_(be_, with_epilogue(s, bias_, relu_), ctx, what),
        in_nhwc_(is_channels_last(ctx.input_layout)),
        core_c_(conv_.core_channels()),
        out_nhwc_(conv_.nhwc() && may_write_channels_last(ctx)),
        bias_split_(bias_grad_split(s.batch, s.filters, s.oh * s.ow, conv_.nhwc(), conv_.dtype())),
        out_(conv_.dtype(), conv_.nhwc(), out_nhwc_, s.batch, s.filters, s.oh, s.ow) {
    if (in_nhwc_ && !conv_.nhwc())
      throw InternalError(what + ": a channels-last input to an NCHW convolution");
  }

  std::shared_ptr<const Layout> output_layout() const override {
    return out_nhwc_ ? channels_last() : nullptr;
  }

  // [the convolution's workspace] [the bias gradient's scratch] [x in the core layout]
  // [the output edge]: all rebuilt by every call.
  size_t workspace_bytes() const override {
    return conv_.workspace_bytes() + bias_bytes() + align_up(input_edge_bytes()) +
           align_up(out_.workspace_bytes());
  }
  bool workspace_is_transient() const override { return true; }
  size_t kept_workspace_bytes() const override { return conv_.kept_bytes(); }
  // Where the input feeds other layers too, cuDNN adds this one's input gradient to theirs (beta
  // = 1) when dx is computed in place: no scratch gradient and no separate sum (resnet18 at 224:
  // 0.7 ms a step of sums).
  bool accumulates_input_grads() const override { return conv_.accumulates_dx() && !input_edge_bytes(); }
  bool wants_low_precision_params() const override { return conv_.reads_low_weights(); }
  bool low_param_krsc(size_t i, LowFilterLayout* f) const override {
    if (i != 0 || !conv_.reads_low_weights()) return false;
    conv_.filter_dims(f);
    return true;
  }

  void bind(const KernelBinding& b) override {
    a_ = TypedActivations(b, conv_.dtype());
    accumulate_dx_ = !b.accumulate_input_grads.empty() && b.accumulate_input_grads[0];
    w_ = b.param(0).f32();
    dw_ = b.grad(0).f32();
    if (bias_) {
      b_ = b.param(1).f32();
      db_ = b.grad(1).f32();
    }
    char* base = static_cast<char*>(b.workspace);
    conv_.bind(base, b.kept_workspace, b.param_low(0, conv_.dtype()));
    base += conv_.workspace_bytes();
    bias_scratch_ = reinterpret_cast<double*>(base);
    base += bias_bytes();
    x_core_ = input_edge_bytes() ? base : nullptr;
    base += align_up(input_edge_bytes());
    out_.bind(base, a_.y, a_.dy);
  }

  void forward(bool) override {
    void* y = out_.core_y();
    const bool done = conv_.forward(core_input(), w_, y, bias_ ? b_ : nullptr, relu_);
    if (!done && bias_)  // the relu rides on the bias kernel
      launch_bias_add(a_.dtype, y, b_, batch_, filters_, out_spatial_, conv_.nhwc(), be_.stream(), relu_);
    else if (!done && relu_)
      launch_eltwise_forward(Eltwise::relu, 0.f, a_.dtype, y, y, batch_ * filters_ * out_spatial_,
                             be_.stream());
    out_.finish_forward(be_.stream());
  }

  void backward() override {
    // A fused relu: our kernels read dy = dz through the mask of the stored output z; before a
    // cuDNN direction dz is masked in place (the output's gradient is ours to overwrite,
    // KernelContext::fused_relu). Both from the layer's own output and gradient, in the output's
    // layout: the output edge's core copy of z lives in the transient workspace, gone by now.
    const bool masked_inside = relu_ && conv_.masks_relu(a_.dx != nullptr);
    if (relu_ && !masked_inside)
      launch_eltwise_backward(Eltwise::relu, 0.f, a_.dtype, a_.y, a_.dy, const_cast<void*>(a_.dy),
                              batch_ * filters_ * out_spatial_, be_.stream());
    const void* dy = out_.core_dy(be_.stream());
    if (masked_inside && dy != a_.dy) throw InternalError("a fused relu's mask in another layout than dy");
    const void* x = core_input();
    // dx in the core layout: the input edge's buffer once the filter gradient has read x there.
    void* dx = a_.dx && x_core_ ? x_core_ : a_.dx;
    const float* relu_z = masked_inside ? static_cast<const float*>(a_.y) : nullptr;
    const bool bias_done = conv_.backward(x, w_, dy, dw_, dx, bias_ ? db_ : nullptr, relu_z, accumulate_dx_);
    if (bias_ && !bias_done) launch_bias_grad(bias_split_, a_.dtype, dy, db_, bias_scratch_, be_.stream());
    if (a_.dx && x_core_)
      launch_relayout(a_.dtype, x_core_, true, core_c_, a_.dx, in_nhwc_, in_[1], in_[0], in_[2] * in_[3],
                      be_.stream());
  }

 private:
  size_t bias_bytes() const { return bias_ ? align_up(bias_grad_scratch_bytes(bias_split_)) : 0; }
  // x goes through the workspace when it is not in the core's layout: plain NCHW, or channels
  // padded for the tensor cores (CudnnConv::core_channels).
  size_t input_edge_bytes() const {
    const bool edge = conv_.nhwc() && (!in_nhwc_ || core_c_ != in_[1]);
    return edge ? size_t(in_[0] * core_c_ * in_[2] * in_[3]) * dtype_bytes(conv_.dtype()) : 0;
  }
  // x in the core layout.
  const void* core_input() {
    if (!x_core_) return a_.x;
    launch_relayout(a_.dtype, a_.x, in_nhwc_, in_[1], x_core_, true, core_c_, in_[0], in_[2] * in_[3],
                    be_.stream());
    return x_core_;
  }

  TypedActivations a_;
  CudaBackend& be_;
  bool bias_;
  bool relu_;                   // KernelContext::fused_relu
  bool accumulate_dx_ = false;  // KernelBinding::accumulate_input_grads[0]
  int64_t batch_, filters_, out_spatial_;
  std::array<int64_t, 4> in_;  // x: (B, C, H, W)
  CudnnConv conv_;
  bool in_nhwc_;
  int64_t core_c_;  // the input channels of the core (padded, CudnnConv::core_channels)
  bool out_nhwc_;
  BiasGradSplit bias_split_;
  OutputEdge out_;
  void* x_core_ = nullptr;
  double* bias_scratch_ = nullptr;
  const float *w_ = nullptr, *b_ = nullptr;
  float *dw_ = nullptr, *db_ = nullptr;
};

}  // namespace

std::unique_ptr<LayerKernel> make_cudnn_conv_layer(const ConvShape& s, bool bias, const KernelContext& ctx,
                                                   const std::string& what) {
  return std::make_unique<CudnnConvLayer>(s, bias, ctx, what);
}

CudnnConv::CudnnConv(CudaBackend& be, const ConvShape& s, const KernelContext& ctx, const std::string& what)
    : be_(be), dtype_(ctx.act_dtype), nhwc_(ctx.act_dtype != DType::f32) {
  k_ = s.filters;
  c_ = s.channels / s.groups;
  r_ = s.kh;
  s_ = s.kw;
  groups_ = s.groups;
  cp_ = nhwc_ && s.groups == 1 && c_ % 8 ? (c_ + 7) / 8 * 8 : c_;
  const int64_t channels = cp_ * groups_;  // what cuDNN sees
  asym_ = s.pad_top != s.pad_bottom || s.pad_left != s.pad_right;
  pad_.planes = nhwc_ ? s.batch : s.batch * channels;
  pad_.inner = nhwc_ ? channels : 1;
  pad_.h = s.h;
  pad_.w = s.w;
  pad_.top = s.pad_top;
  pad_.bottom = s.pad_bottom;
  pad_.left = s.pad_left;
  pad_.right = s.pad_right;
  const int64_t xh = asym_ ? pad_.ph() : s.h, xw = asym_ ? pad_.pw() : s.w;
  const int pad_h = asym_ ? 0 : int(s.pad_top), pad_w = asym_ ? 0 : int(s.pad_left);
  set_nchw(x_desc_, s.batch, channels, xh, xw, dtype_, nhwc_);
  set_nchw(y_desc_, s.batch, s.filters, s.oh, s.ow, dtype_, nhwc_);
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_desc_, cudnn_type(dtype_),
                                         nhwc_ ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW, int(k_), int(cp_),
                                         int(r_), int(s_)));
  const bool strict = ctx.math == MathMode::strict_fp32;
  for (ConvDesc& d : conv_desc_) {
    CUDNN_CHECK(cudnnSetConvolution2dDescriptor(d, pad_h, pad_w, int(s.sh), int(s.sw), 1, 1,
                                                CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    CUDNN_CHECK(cudnnSetConvolutionGroupCount(d, int(s.groups)));
  }
  reset_math(strict);
  int n, c, h, w;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(conv_desc_[kFwd], x_desc_, w_desc_, &n, &c, &h, &w));
  if (n != s.batch || c != s.filters || h != s.oh || w != s.ow)
    throw InternalError(what + ": cuDNN's output shape (" + std::to_string(n) + ", " + std::to_string(c) +
                        ", " + std::to_string(h) + ", " + std::to_string(w) + ") differs from the layer's");
  const size_t elem = dtype_bytes(dtype_);
  w_elems_ = k_ * c_ * r_ * s_;
  const size_t x_bytes = size_t(s.batch * channels * xh * xw) * elem;
  const size_t w_bytes = size_t(k_ * cp_ * r_ * s_) * elem;
  const size_t y_bytes = size_t(s.batch * s.filters * s.oh * s.ow) * elem;
  // The convolution cuDNN sees.
  std::string key = std::string(dtype_name(dtype_)) + (nhwc_ ? " nhwc " : " nchw ");
  for (int64_t v : {s.batch, channels, xh, xw, s.filters, s.kh, s.kw, s.sh, s.sw, int64_t(pad_h),
                    int64_t(pad_w), s.groups})
    key += std::to_string(v) + ",";
  choose_algorithms(what, ctx.deterministic, ctx.measure, strict, key, x_bytes, w_bytes, y_bytes);
  // Our direct kernels are timed against cuDNN only where they can win: small convolutions (the
  // 16-64 channel maps of 28 x 28 and 32 x 32). Beyond ~8.6e9 multiply-adds a batch they lost every
  // direction but one (resnet18's stem forward at 224 x 224, by 10%) on an H200, and timing their
  // tilings there took 24 s of resnet18_imagenet's cold first step in fp32.
  macs_ = double(s.batch) * double(s.filters) * double(c_) * double(r_ * s_) * double(s.oh * s.ow);
  // A batch size that is not measured (KernelContext::measure) runs cuDNN's choices alone.
  if (dtype_ == DType::f32 && !nhwc_ && s.groups == 1 && !ctx.deterministic && ctx.measure &&
      macs_ <= kDirectMaxMacs) {
    DirectConvGeometry g;
    g.n = s.batch;
    g.c = s.channels;
    g.h = s.h;
    g.w = s.w;
    g.k = s.filters;
    g.r = s.kh;
    g.s = s.kw;
    g.sh = s.sh;
    g.sw = s.sw;
    g.pad_top = s.pad_top;
    g.pad_left = s.pad_left;
    g.oh = s.oh;
    g.ow = s.ow;
    direct_ = std::make_unique<DirectConv>(g, be_.device());
    choose_direct(what, key, x_bytes, w_bytes, y_bytes);
  }
  // cuDNN's graph API (cudnn_graph.h): 16-bit channels-last, groups 1, symmetric padding, not
  // --deterministic (a timed choice).
  if (nhwc_ && s.groups == 1 && !asym_ && !ctx.deterministic && ctx.measure) {
    const size_t max_ws = max_scratch(be_.allocator());
    if (s.bias || s.relu) choose_fused(what, s, key, x_bytes, w_bytes, y_bytes, max_ws);
    choose_wgrad(what, s, key, x_bytes, w_bytes, y_bytes, max_ws);
  }
  if (asym_) padded_bytes_ = align_up(size_t(pad_.planes * pad_.ph() * pad_.pw() * pad_.inner) * elem);
  if (dtype_ != DType::f32) weight_bytes_ = align_up(w_bytes);
  low_w_ = nhwc_ && groups_ == 1 && cp_ == c_ && ctx.low_precision_params;
}

void CudnnConv::bind(void* workspace, void* kept, const void* low) {
  char* base = static_cast<char*>(workspace);
  xpad_ = asym_ ? base : nullptr;
  dw_typed_ = weight_bytes_ ? base + padded_bytes_ : nullptr;
  scratch_ = scratch_bytes_ ? base + padded_bytes_ + weight_bytes_ : nullptr;
  if (low_w_) {
    if (!low) throw InternalError("a convolution bound without the executor's 16-bit copy of its filter");
    w_typed_ = const_cast<void*>(low);  // read only
    return;
  }
  if (weight_bytes_ && !kept)
    throw InternalError("a low-precision convolution bound without its kept workspace");
  w_typed_ = weight_bytes_ ? kept : nullptr;
}

const void* CudnnConv::typed_weights(const float* w, bool forward) {
  if (dtype_ == DType::f32) return w;
  if (!forward || low_w_) return w_typed_;  // this step's forward converted them, or the optimizer did
  if (nhwc_)
    launch_filter_to_krsc(w, dtype_, w_typed_, k_, c_, cp_, r_, s_, be_.stream());
  else
    launch_convert(w_typed_, dtype_, w, DType::f32, w_elems_, false, be_.stream());
  return w_typed_;
}

bool CudnnConv::forward(const void* x, const float* w, void* y, const float* bias, bool relu) {
  if (direct_fwd_) {
    direct_->forward(static_cast<const float*>(x), w, bias, static_cast<float*>(y), scratch_, be_.stream(),
                     relu);
    return true;
  }
  if (fused_) {
    if ((bias != nullptr) != fused_bias_ || relu != fused_relu_)
      throw InternalError("CudnnConv::forward: a bias or relu other than the fused graph's");
    const void* wt = typed_weights(w, true);
    GraphPointers ptrs = {{kGraphX, x}, {kGraphW, wt}, {kGraphY, y}};
    if (bias) ptrs.add(kGraphB, bias);
    fused_->run(ptrs, scratch_);
    return true;
  }
  const void* xin = padded_input(x);
  const void* wt = typed_weights(w, true);
  CUDNN_CHECK(cudnnConvolutionForward(be_.cudnn(), &kOne, x_desc_, xin, w_desc_, wt, conv_desc_[kFwd],
                                      fwd_algo_, scratch_, fwd_ws_, &kZero, y_desc_, y));
  return false;
}

bool CudnnConv::backward(const void* x, const float* w, const void* dy, float* dw, void* dx, float* db,
                         const float* relu_z, bool accumulate_dx) {
  if (accumulate_dx && !accumulates_dx())
    throw InternalError("CudnnConv::backward: dx cannot be added to here");
  if (relu_z && !masks_relu(dx != nullptr))
    throw InternalError("CudnnConv::backward: a relu mask for a direction cuDNN runs");
  const auto* dy32 = static_cast<const float*>(dy);
  if (direct_bwd_filter_) {
    direct_->backward_filter(static_cast<const float*>(x), dy32, dw, db, scratch_, be_.stream(), relu_z);
  } else {
    backward_filter(x, dy, dw);
  }
  if (dx && direct_bwd_data_)
    direct_->backward_data(dy32, w, static_cast<float*>(dx), scratch_, be_.stream(), relu_z);
  else if (dx)
    backward_data(w, dy, dx, accumulate_dx);
  return direct_bwd_filter_;
}

void CudnnConv::backward_filter(const void* x, const void* dy, float* dw) {
  const void* xin = padded_input(x);
  void* dwt = dtype_ == DType::f32 ? static_cast<void*>(dw) : dw_typed_;
  if (wgrad_)
    wgrad_->run({{kGraphX, xin}, {kGraphY, dy}, {kGraphW, dwt}}, scratch_);
  else
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(be_.cudnn(), &kOne, x_desc_, xin, y_desc_, dy,
                                               conv_desc_[kBwdFilter], bwd_filter_algo_, scratch_,
                                               bwd_filter_ws_, &kZero, w_desc_, dwt));
  if (dwt != dw && nhwc_)
    launch_krsc_to_filter(dtype_, dwt, dw, k_, c_, cp_, r_, s_, be_.stream());
  else if (dwt != dw)
    launch_convert(dw, DType::f32, dwt, dtype_, w_elems_, false, be_.stream());
}

void CudnnConv::backward_data(const float* w, const void* dy, void* dx, bool accumulate) {
  // With explicit padding the padded input is no longer needed: its buffer takes d(padded x).
  void* dxin = asym_ ? xpad_ : dx;
  const void* wt = typed_weights(w, false);
  CUDNN_CHECK(cudnnConvolutionBackwardData(be_.cudnn(), &kOne, w_desc_, wt, y_desc_, dy, conv_desc_[kBwdData],
                                           bwd_data_algo_, scratch_, bwd_data_ws_,
                                           accumulate ? &kOne : &kZero, x_desc_, dxin));
  if (asym_) launch_crop2d(pad_, dtype_, xpad_, dx, be_.stream());
}

// Pads x into the workspace when the padding is asymmetric (every call: backward does not rely
// on what forward left there).
const void* CudnnConv::padded_input(const void* x) {
  if (!asym_) return x;
  launch_pad2d(pad_, dtype_, x, xpad_, be_.stream());
  return xpad_;
}

namespace {

// Algorithms measured once per process for each distinct convolution (the descriptors' text, the
// GPU and the math mode): ResNet-18 has 20 convolutions but 12 shapes, and a second plan (another
// batch size) of the same shapes measures nothing again.
std::mutex g_chosen_mutex;
std::map<std::string, CudnnConv::Chosen>& chosen_cache() {
  static std::map<std::string, CudnnConv::Chosen> m;
  return m;
}

// ... and across processes, on disk (kernels/cuda/algo_disk_cache.h): a warm start measures
// nothing.
std::string encode(const CudnnConv::Chosen& c) {
  return fmt::format("{} {} {} {} {} {}", int(c.fwd), int(c.fwd_math), int(c.bwd_data), int(c.bwd_data_math),
                     int(c.bwd_filter), int(c.bwd_filter_math));
}

// Six integers, each within its enum; false for anything else (the entry is measured again).
bool decode(const std::string& text, CudnnConv::Chosen* c) {
  std::istringstream in(text);
  int v[6];
  for (int& x : v)
    if (!(in >> x)) return false;
  std::string rest;
  if (in >> rest) return false;
  const auto math_ok = [](int m) { return m >= int(CUDNN_DEFAULT_MATH) && m <= int(CUDNN_FMA_MATH); };
  if (v[0] < 0 || v[0] >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT || v[2] < 0 ||
      v[2] >= CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT || v[4] < 0 ||
      v[4] >= CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT || !math_ok(v[1]) || !math_ok(v[3]) || !math_ok(v[5]))
    return false;
  c->fwd = cudnnConvolutionFwdAlgo_t(v[0]);
  c->fwd_math = cudnnMathType_t(v[1]);
  c->bwd_data = cudnnConvolutionBwdDataAlgo_t(v[2]);
  c->bwd_data_math = cudnnMathType_t(v[3]);
  c->bwd_filter = cudnnConvolutionBwdFilterAlgo_t(v[4]);
  c->bwd_filter_math = cudnnMathType_t(v[5]);
  return true;
}

using Clock = std::chrono::steady_clock;

bool tensor_op(cudnnMathType_t m) {
  return m == CUDNN_TENSOR_OP_MATH || m == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
}

// The measured entry of `algo` on the same kind of unit (tensor cores or not) as `math`; null when
// it was not measured. (Heuristics report FMA algorithms as CUDNN_DEFAULT_MATH, measurement under
// an FMA descriptor as CUDNN_FMA_MATH.)
template <class Perf, class Algo>
const Perf* measured(const Perf* perf, int n, Algo algo, cudnnMathType_t math) {
  for (int i = 0; i < n; ++i)
    if (perf[i].algo == algo && tensor_op(perf[i].mathType) == tensor_op(math) &&
        perf[i].status == CUDNN_STATUS_SUCCESS)
      return &perf[i];
  return nullptr;
}

// Times the algorithms of cuDNN's heuristic list (cudnnGet*_v7: every algorithm it can run on this
// shape, each with the math type it was ranked under) as a step runs them, and sorts the list
// fastest first, as cudnnFind*Ex returns it: perf[i].time in ms, -1 where not timed (the run
// failed, or it needs more than the scratch; a failed run's status is kept). strict: each runs
// under CUDNN_FMA_MATH, as choose_algorithms will run it. cudnnFind*Ex times each algorithm alone,
// eagerly, which ranks small convolutions differently from a step: timed in CUDA graphs
// (fastest_candidate) the choices ran faster (H200, steps/s against cudnnFind's, same run:
// resnet_fashion_mnist 603-611 -> 726, resnet18_cifar fp32 96.6 -> 98.9, tf32 150-155 -> 162,
// vgg11_bn_cifar fp32 206 -> 211, tf32 338 -> 351; cifar10_cnn, batch 32, 5,930 -> 5,600).
// host_ms[0] and [1]: wall milliseconds of the eager pass and of the timing, for the debug log.
template <class Perf, class Call>
void time_listed(cudaStream_t stream, Perf* perf, int n, bool strict, cudnnConvolutionDescriptor_t desc,
                 const Call& call, double (&host_ms)[2]) {
  const auto t0 = Clock::now();
  const auto math_of = [&](const Perf& p) { return strict ? CUDNN_FMA_MATH : p.mathType; };
  std::vector<int> timed;
  for (int i = 0; i < n; ++i) {
    Perf& p = perf[i];
    p.time = -1.f;
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    bool seen = false;
    for (int j : timed) seen = seen || (perf[j].algo == p.algo && math_of(perf[j]) == math_of(p));
    if (seen) continue;
    // Eagerly first: an algorithm the heuristics list but this shape or scratch cannot run says
    // so here, instead of failing the graph.
    cudnnStatus_t st = cudnnSetConvolutionMathType(desc, math_of(p));
    if (st == CUDNN_STATUS_SUCCESS) st = call(p.algo);
    if (st != CUDNN_STATUS_SUCCESS) {
      p.status = st;
      continue;
    }
    timed.push_back(i);
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
  CUDA_CHECK(cudaGetLastError());
  host_ms[0] = ms_since(t0);
  if (timed.empty()) return;
  const auto t1 = Clock::now();
  // fastest_candidate runs them eagerly once more to size their repeats. Sizing them by the runs
  // above instead (each algorithm's first, which loads its kernels) was tried: resnet_fashion_mnist
  // chose algorithms that ran 2.5% slower (H200, two cold starts each).
  const Fastest f = fastest_candidate(stream, timed.size(), [&](size_t k) {
    const Perf& p = perf[timed[k]];
    CUDNN_CHECK(cudnnSetConvolutionMathType(desc, math_of(p)));
    CUDNN_CHECK(call(p.algo));
  });
  host_ms[1] = ms_since(t1);
  for (size_t k = 0; k < timed.size(); ++k) perf[timed[k]].time = f.each[k];
  std::stable_sort(perf, perf + n, [](const Perf& a, const Perf& b) {
    const bool ta = a.time >= 0, tb = b.time >= 0;
    return ta != tb ? ta : ta && a.time < b.time;
  });
}

}  // namespace

// Algorithms: without --deterministic, every algorithm cuDNN can run on this shape is timed once
// (time_listed; what PyTorch's cudnn.benchmark does with cudnnFind) and the fastest acceptable one
// is kept. cuDNN's heuristic ranking (cudnnGet*_v7) picked legacy kernels for several ResNet
// shapes (wgrad_alg0_engine, dgrad_engine: 0.3-0.5 ms where the measured best takes a fraction).
// With --deterministic the heuristic ranking is used: the choice must not depend on timing noise,
// or two runs could differ. If the measurement buffers do not fit (--mem-limit), the heuristics
// are used too. Either way each direction's descriptor then gets the math type the algorithm was
// ranked with: an algorithm number alone, run under another math type, is another kernel (TF32
// runs measured on tensor cores ran as the legacy implicit_convolve_sgemm without this).
// bf16 (channels-last) convolutions take cuDNN's heuristic ranking too: its measurement in
// isolation chose slower kernels for them than its heuristics do (H100, steps/s with measured
// against heuristic choices: vgg11_bn_cifar 383 / 446, cifar10_cnn 3,146 / 4,555, resnet18_cifar
// 173 / 191). So do the batch sizes a plan does not measure (KernelContext::measure: all but the
// largest), which run once an epoch.
void CudnnConv::choose_algorithms(const std::string& what, bool deterministic, bool measure, bool strict,
                                  const std::string& shape_key, size_t x_bytes, size_t w_bytes,
                                  size_t y_bytes) {
  const size_t max_ws = max_scratch(be_.allocator());
  Chosen c{};
  bool chosen = false;
  if (!deterministic && (dtype_ != DType::f32 || !measure)) {
    try {
      c = heuristic_algorithms(what, false, strict, max_ws);
      chosen = true;
    } catch (const RuntimeError&) {  // nothing within the scratch bound: measure what fits
    }
  }
  if (chosen) {
  } else if (!deterministic) {
    if (!measure_algorithms(what, false, strict, max_ws, shape_key, x_bytes, w_bytes, y_bytes, &c))
      c = heuristic_algorithms(what, false, strict, max_ws);
  } else {
    try {
      c = heuristic_algorithms(what, true, strict, max_ws);
    } catch (const RuntimeError&) {
      // The heuristic list has no deterministic entry (TF32, ResNet's 64-channel backward-data):
      // every algorithm cuDNN can run, the deterministic ones in algorithm-number order (not by
      // time, so two runs choose the same).
      if (!measure_algorithms(what, true, strict, max_ws, shape_key, x_bytes, w_bytes, y_bytes, &c)) throw;
    }
  }
  for (int d = 0; d < 3; ++d) chosen_ms_[d] = c.ms[d];
  fwd_algo_ = c.fwd;
  bwd_data_algo_ = c.bwd_data;
  bwd_filter_algo_ = c.bwd_filter;
  if (strict) {  // heuristics report FMA algorithms as CUDNN_DEFAULT_MATH, which permits TF32
    c.fwd_math = CUDNN_FMA_MATH;
    c.bwd_data_math = CUDNN_FMA_MATH;
    c.bwd_filter_math = CUDNN_FMA_MATH;
  }
  CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_[kFwd], c.fwd_math));
  CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_[kBwdData], c.bwd_data_math));
  CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_[kBwdFilter], c.bwd_filter_math));
  const cudnnHandle_t h = be_.cudnn();
  CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, x_desc_, w_desc_, conv_desc_[kFwd], y_desc_,
                                                      fwd_algo_, &fwd_ws_));
  CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, w_desc_, y_desc_, conv_desc_[kBwdData], x_desc_,
                                                           bwd_data_algo_, &bwd_data_ws_));
  CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x_desc_, y_desc_, conv_desc_[kBwdFilter],
                                                             w_desc_, bwd_filter_algo_, &bwd_filter_ws_));
  scratch_bytes_ = align_up(std::max({fwd_ws_, bwd_data_ws_, bwd_filter_ws_}));  // 0 stays 0
}

// Scratch size of `algo` run under `math` on direction d's descriptor (its math type is set for
// the query; choose_algorithms sets the final one).
template <class Algo, class Query>
cudnnStatus_t scratch_of(cudnnConvolutionDescriptor_t d, cudnnMathType_t math, Algo algo, size_t* bytes,
                         Query query) {
  cudnnStatus_t st = cudnnSetConvolutionMathType(d, math);
  return st == CUDNN_STATUS_SUCCESS ? query(algo, bytes) : st;
}

CudnnConv::Chosen CudnnConv::ranked(const std::string& what, bool deterministic, bool strict, size_t max_ws,
                                    const cudnnConvolutionFwdAlgoPerf_t* fwd, int n_fwd,
                                    const cudnnConvolutionBwdDataAlgoPerf_t* bd, int n_bd,
                                    const cudnnConvolutionBwdFilterAlgoPerf_t* bf, int n_bf) {
  const cudnnHandle_t h = be_.cudnn();
  Chosen c{};
  size_t unused = 0;
  c.fwd = pick<cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionFwdAlgo_t>(
      fwd, n_fwd, deterministic, strict, max_ws,
      [&](cudnnConvolutionFwdAlgo_t a, cudnnMathType_t m, size_t* b) {
        return scratch_of(conv_desc_[kFwd], m, a, b, [&](cudnnConvolutionFwdAlgo_t a2, size_t* b2) {
          return cudnnGetConvolutionForwardWorkspaceSize(h, x_desc_, w_desc_, conv_desc_[kFwd], y_desc_, a2,
                                                         b2);
        });
      },
      &unused, &c.fwd_math, what + " forward");
  c.bwd_data = pick<cudnnConvolutionBwdDataAlgoPerf_t, cudnnConvolutionBwdDataAlgo_t>(
      bd, n_bd, deterministic, strict, max_ws,
      [&](cudnnConvolutionBwdDataAlgo_t a, cudnnMathType_t m, size_t* b) {
        return scratch_of(conv_desc_[kBwdData], m, a, b, [&](cudnnConvolutionBwdDataAlgo_t a2, size_t* b2) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(h, w_desc_, y_desc_, conv_desc_[kBwdData],
                                                              x_desc_, a2, b2);
        });
      },
      &unused, &c.bwd_data_math, what + " backward-data");
  c.bwd_filter = pick<cudnnConvolutionBwdFilterAlgoPerf_t, cudnnConvolutionBwdFilterAlgo_t>(
      bf, n_bf, deterministic, strict, max_ws,
      [&](cudnnConvolutionBwdFilterAlgo_t a, cudnnMathType_t m, size_t* b) {
        return scratch_of(conv_desc_[kBwdFilter], m, a, b,
                          [&](cudnnConvolutionBwdFilterAlgo_t a2, size_t* b2) {
                            return cudnnGetConvolutionBackwardFilterWorkspaceSize(
                                h, x_desc_, y_desc_, conv_desc_[kBwdFilter], w_desc_, a2, b2);
                          });
      },
      &unused, &c.bwd_filter_math, what + " backward-filter");
  return c;
}

bool CudnnConv::measure_algorithms(const std::string& what, bool deterministic, bool strict, size_t max_ws,
                                   const std::string& shape_key, size_t x_bytes, size_t w_bytes,
                                   size_t y_bytes, Chosen* out) {
  const std::string key = "gpu" + std::to_string(be_.device()) + (strict ? " fma " : " any ") +
                          (deterministic ? "det " : "") + shape_key + std::to_string(max_ws);
  {
    std::lock_guard<std::mutex> lock(g_chosen_mutex);
    auto it = chosen_cache().find(key);
    if (it != chosen_cache().end()) {
      *out = it->second;
      return true;
    }
  }
  const cudnnHandle_t h = be_.cudnn();
  // A choice measured by an earlier process on this GPU, driver and cuDNN, if each of its
  // algorithms still runs this shape within the scratch bound.
  const std::string disk_key = gpu_identity(be_.device()) + (strict ? " fma " : " any ") +
                               (deterministic ? "det " : "") + shape_key + std::to_string(max_ws);
  std::string stored;
  Chosen c{};
  if (conv_algo_cache().get(disk_key, &stored) && decode(stored, &c)) {
    size_t b = 0;
    const bool ok =
        cudnnSetConvolutionMathType(conv_desc_[kFwd], c.fwd_math) == CUDNN_STATUS_SUCCESS &&
        cudnnGetConvolutionForwardWorkspaceSize(h, x_desc_, w_desc_, conv_desc_[kFwd], y_desc_, c.fwd, &b) ==
            CUDNN_STATUS_SUCCESS &&
        b <= max_ws &&
        cudnnSetConvolutionMathType(conv_desc_[kBwdData], c.bwd_data_math) == CUDNN_STATUS_SUCCESS &&
        cudnnGetConvolutionBackwardDataWorkspaceSize(h, w_desc_, y_desc_, conv_desc_[kBwdData], x_desc_,
                                                     c.bwd_data, &b) == CUDNN_STATUS_SUCCESS &&
        b <= max_ws &&
        cudnnSetConvolutionMathType(conv_desc_[kBwdFilter], c.bwd_filter_math) == CUDNN_STATUS_SUCCESS &&
        cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x_desc_, y_desc_, conv_desc_[kBwdFilter], w_desc_,
                                                       c.bwd_filter, &b) == CUDNN_STATUS_SUCCESS &&
        b <= max_ws;
    reset_math(strict);
    if (ok) {
      spdlog::debug("{}: algorithms {} from {}", what, stored, conv_algo_cache().path());
      *out = c;
      std::lock_guard<std::mutex> lock(g_chosen_mutex);
      chosen_cache()[key] = *out;
      return true;
    }
  }
  // The measurement's scratch: the most that any algorithm of the three directions, under any
  // math type, needs within max_ws (cuDNN skips those that need more), not max_ws itself. A
  // 256 MiB buffer taken for 28x28 convolutions that need a few MiB at most was most of a small
  // network's peak memory (291 MiB against PyTorch's 54), and the allocator keeps what it reserved.
  const auto t_scratch = Clock::now();
  size_t scratch = 0;
  for (cudnnMathType_t m :
       {CUDNN_DEFAULT_MATH, CUDNN_TENSOR_OP_MATH, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION, CUDNN_FMA_MATH}) {
    const auto fits = [&](cudnnStatus_t st, size_t bytes) {
      if (st == CUDNN_STATUS_SUCCESS && bytes <= max_ws) scratch = std::max(scratch, bytes);
    };
    size_t b = 0;
    if (cudnnSetConvolutionMathType(conv_desc_[kFwd], m) == CUDNN_STATUS_SUCCESS)
      for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a)
        fits(cudnnGetConvolutionForwardWorkspaceSize(h, x_desc_, w_desc_, conv_desc_[kFwd], y_desc_,
                                                     cudnnConvolutionFwdAlgo_t(a), &b),
             b);
    if (cudnnSetConvolutionMathType(conv_desc_[kBwdData], m) == CUDNN_STATUS_SUCCESS)
      for (int a = 0; a < CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT; ++a)
        fits(cudnnGetConvolutionBackwardDataWorkspaceSize(h, w_desc_, y_desc_, conv_desc_[kBwdData], x_desc_,
                                                          cudnnConvolutionBwdDataAlgo_t(a), &b),
             b);
    if (cudnnSetConvolutionMathType(conv_desc_[kBwdFilter], m) == CUDNN_STATUS_SUCCESS)
      for (int a = 0; a < CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT; ++a)
        fits(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, x_desc_, y_desc_, conv_desc_[kBwdFilter],
                                                            w_desc_, cudnnConvolutionBwdFilterAlgo_t(a), &b),
             b);
  }
  reset_math(strict);
  const double scratch_ms = ms_since(t_scratch);
  double buffers_ms = 0, heuristics_ms = 0;
  try {
    auto t_buf = Clock::now();
    MeasureBuffers buf(be_.allocator());
    void* x = buf.take(x_bytes, what + ": measuring algorithms (input)");
    void* w = buf.take(w_bytes, what + ": measuring algorithms (weights)");
    void* y = buf.take(y_bytes, what + ": measuring algorithms (output)");
    void* ws = scratch ? buf.take(scratch, what + ": measuring algorithms (scratch)") : nullptr;
    be_.zero(x, x_bytes);
    be_.zero(w, w_bytes);
    be_.zero(y, y_bytes);
    int n_fwd = 0, n_bd = 0, n_bf = 0;
    cudnnConvolutionFwdAlgoPerf_t fwd[kMaxAlgos];
    cudnnConvolutionBwdDataAlgoPerf_t bd[kMaxAlgos];
    cudnnConvolutionBwdFilterAlgoPerf_t bf[kMaxAlgos];
    reset_math(strict);
    buffers_ms = ms_since(t_buf);
    t_buf = Clock::now();
    CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, x_desc_, w_desc_, conv_desc_[kFwd], y_desc_,
                                                       kMaxAlgos, &n_fwd, fwd));
    CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w_desc_, y_desc_, conv_desc_[kBwdData],
                                                            x_desc_, kMaxAlgos, &n_bd, bd));
    CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x_desc_, y_desc_, conv_desc_[kBwdFilter],
                                                              w_desc_, kMaxAlgos, &n_bf, bf));
    heuristics_ms = ms_since(t_buf);
    const cudaStream_t st = be_.stream();
    double host_ms[3][2] = {};
    time_listed(
        st, fwd, n_fwd, strict, conv_desc_[kFwd],
        [&](cudnnConvolutionFwdAlgo_t a) {
          return cudnnConvolutionForward(h, &kOne, x_desc_, x, w_desc_, w, conv_desc_[kFwd], a, ws, scratch,
                                         &kZero, y_desc_, y);
        },
        host_ms[0]);
    time_listed(
        st, bd, n_bd, strict, conv_desc_[kBwdData],
        [&](cudnnConvolutionBwdDataAlgo_t a) {
          return cudnnConvolutionBackwardData(h, &kOne, w_desc_, w, y_desc_, y, conv_desc_[kBwdData], a, ws,
                                              scratch, &kZero, x_desc_, x);
        },
        host_ms[1]);
    time_listed(
        st, bf, n_bf, strict, conv_desc_[kBwdFilter],
        [&](cudnnConvolutionBwdFilterAlgo_t a) {
          return cudnnConvolutionBackwardFilter(h, &kOne, x_desc_, x, y_desc_, y, conv_desc_[kBwdFilter], a,
                                                ws, scratch, &kZero, w_desc_, w);
        },
        host_ms[2]);
    spdlog::debug(
        "{}: scratch sizes {:.1f} ms, buffers {:.1f} ms, cuDNN's lists {:.1f} ms; measuring them ({}, {}, "
        "{} algorithms) took {:.1f} + {:.1f}, {:.1f} + {:.1f}, {:.1f} + {:.1f} ms (first runs + timing)",
        what, scratch_ms, buffers_ms, heuristics_ms, n_fwd, n_bd, n_bf, host_ms[0][0], host_ms[0][1],
        host_ms[1][0], host_ms[1][1], host_ms[2][0], host_ms[2][1]);
    reset_math(strict);
    if (deterministic) {  // algorithm-number order, stable across runs
      const auto by_algo = [](const auto& a, const auto& b) {
        return std::make_pair(int(a.algo), int(a.mathType)) < std::make_pair(int(b.algo), int(b.mathType));
      };
      std::sort(fwd, fwd + n_fwd, by_algo);
      std::sort(bd, bd + n_bd, by_algo);
      std::sort(bf, bf + n_bf, by_algo);
    }
    *out = ranked(what, deterministic, strict, max_ws, fwd, n_fwd, bd, n_bd, bf, n_bf);
    if (!deterministic) prefer_recommended(what, strict, max_ws, fwd, n_fwd, bd, n_bd, bf, n_bf, out);
    const auto ms_of = [](const auto* perf, int n, auto algo, cudnnMathType_t math) {
      const auto* p = measured(perf, n, algo, math);
      return p && p->time >= 0 ? p->time : -1.f;
    };
    out->ms[0] = ms_of(fwd, n_fwd, out->fwd, out->fwd_math);
    out->ms[1] = ms_of(bd, n_bd, out->bwd_data, out->bwd_data_math);
    out->ms[2] = ms_of(bf, n_bf, out->bwd_filter, out->bwd_filter_math);
    if (spdlog::should_log(spdlog::level::debug)) {
      const auto list = [](const auto* perf, int n) {
        std::string t;
        for (int i = 0; i < n && i < 4; ++i)
          t += fmt::format(" algo {} math {} {:.3f} ms {} ({});", int(perf[i].algo), int(perf[i].mathType),
                           perf[i].time, format_bytes(perf[i].memory), int(perf[i].status));
        return t;
      };
      spdlog::debug("{}: measured forward:{} chose {}/{}", what, list(fwd, n_fwd), int(out->fwd),
                    int(out->fwd_math));
      spdlog::debug("{}: measured backward-data:{} chose {}/{}", what, list(bd, n_bd), int(out->bwd_data),
                    int(out->bwd_data_math));
      spdlog::debug("{}: measured backward-filter:{} chose {}/{}", what, list(bf, n_bf), int(out->bwd_filter),
                    int(out->bwd_filter_math));
    }
  } catch (const OutOfMemoryError& e) {
    spdlog::debug("{}: measuring convolution algorithms does not fit ({}); using cuDNN's heuristics", what,
                  e.what());
    return false;
  } catch (const RuntimeError& e) {  // no measured algorithm fits the scratch bound
    spdlog::debug("{}: {}; using cuDNN's heuristics", what, e.what());
    return false;
  }
  conv_algo_cache().put(disk_key, encode(*out));
  std::lock_guard<std::mutex> lock(g_chosen_mutex);
  chosen_cache()[key] = *out;
  return true;
}

// Every direction's descriptor back to the mode's math type, before cuDNN ranks algorithms on it
// (scratch queries leave the math type of the last algorithm they asked about).
//   tf32: CUDNN_TENSOR_OP_MATH, so that measurement and heuristics rank the TF32 tensor-core
//   algorithms (under CUDNN_DEFAULT_MATH cuDNN 9 measured only its FMA variants on the H100).
void CudnnConv::reset_math(bool strict) {
  for (ConvDesc& d : conv_desc_)
    CUDNN_CHECK(cudnnSetConvolutionMathType(d, strict ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH));
}

namespace {

// Keeps cuDNN's recommended choice where the measured best saves less than 20 microseconds: on
// small convolutions a measurement in isolation (cold caches, no neighbours) ranks algorithms
// differently from a step, where the CIFAR CNN ran slower on measured choices 5-15 microseconds
// apart (implicit_convolve_sgemm 50 us where the recommended kernel takes 27 us in the step).
// ResNet's convolutions differ by tens to hundreds of microseconds.
template <class Perf, class Algo>
void keep_if_close(const Perf* perf, int n, Algo recommended, cudnnMathType_t recommended_math, Algo* algo,
                   cudnnMathType_t* math) {
  constexpr float kNoiseMs = 0.02f;
  const Perf* rec = measured(perf, n, recommended, recommended_math);
  const Perf* best = measured(perf, n, *algo, *math);
  if (rec && best && rec->time - best->time < kNoiseMs) {
    *algo = rec->algo;
    *math = rec->mathType;
  }
}

}  // namespace

void CudnnConv::prefer_recommended(const std::string& what, bool strict, size_t max_ws,
                                   const cudnnConvolutionFwdAlgoPerf_t* fwd, int n_fwd,
                                   const cudnnConvolutionBwdDataAlgoPerf_t* bd, int n_bd,
                                   const cudnnConvolutionBwdFilterAlgoPerf_t* bf, int n_bf, Chosen* c) {
  Chosen rec;
  try {
    rec = heuristic_algorithms(what, false, strict, max_ws);
  } catch (const RuntimeError&) {
    return;  // no recommendation fits: the measured choice stands
  }
  keep_if_close(fwd, n_fwd, rec.fwd, rec.fwd_math, &c->fwd, &c->fwd_math);
  keep_if_close(bd, n_bd, rec.bwd_data, rec.bwd_data_math, &c->bwd_data, &c->bwd_data_math);
  keep_if_close(bf, n_bf, rec.bwd_filter, rec.bwd_filter_math, &c->bwd_filter, &c->bwd_filter_math);
}

CudnnConv::Chosen CudnnConv::heuristic_algorithms(const std::string& what, bool deterministic, bool strict,
                                                  size_t max_ws) {
  const cudnnHandle_t h = be_.cudnn();
  reset_math(strict);
  int n_fwd = 0, n_bd = 0, n_bf = 0;
  cudnnConvolutionFwdAlgoPerf_t fwd[kMaxAlgos];
  CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, x_desc_, w_desc_, conv_desc_[kFwd], y_desc_,
                                                     kMaxAlgos, &n_fwd, fwd));
  cudnnConvolutionBwdDataAlgoPerf_t bd[kMaxAlgos];
  CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, w_desc_, y_desc_, conv_desc_[kBwdData], x_desc_,
                                                          kMaxAlgos, &n_bd, bd));
  cudnnConvolutionBwdFilterAlgoPerf_t bf[kMaxAlgos];
  CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, x_desc_, y_desc_, conv_desc_[kBwdFilter],
                                                            w_desc_, kMaxAlgos, &n_bf, bf));
  return ranked(what, deterministic, strict, max_ws, fwd, n_fwd, bd, n_bd, bf, n_bf);
}

namespace {

// The convolution of a graph op: symmetric padding and the strides (dilation 1).
GraphConv graph_conv(const ConvShape& s) {
  GraphConv c;
  c.pad_h = s.pad_top;
  c.pad_w = s.pad_left;
  c.stride_h = s.sh;
  c.stride_w = s.sw;
  return c;
}

}  // namespace

void build_conv_forward_graph(CudnnGraph& g, const ConvShape& s, int64_t channels, DType t) {
  if (!s.bias && !s.relu) throw InternalError("build_conv_forward_graph: nothing to fuse");
  const cudnnDataType_t io = cudnn_type(t);
  const int64_t n = s.batch, k = s.filters;
  const std::array<int64_t, 4> ydims{n, k, s.oh, s.ow}, ystrides = nhwc_strides(n, k, s.oh, s.ow);
  g.tensor({kGraphX, io, {n, channels, s.h, s.w}, nhwc_strides(n, channels, s.h, s.w), false});
  g.tensor({kGraphW, io, {k, channels, s.kh, s.kw}, nhwc_strides(k, channels, s.kh, s.kw), false});
  g.tensor({kGraphConv, CUDNN_DATA_FLOAT, ydims, ystrides, true});
  if (s.bias) g.tensor({kGraphB, CUDNN_DATA_FLOAT, {1, k, 1, 1}, {k, 1, 1, 1}, false});
  if (s.bias && s.relu) g.tensor({kGraphBiased, CUDNN_DATA_FLOAT, ydims, ystrides, true});
  g.tensor({kGraphY, io, ydims, ystrides, false});
  g.conv_fprop(kGraphX, kGraphW, kGraphConv, graph_conv(s));
  if (s.bias) g.pointwise(CUDNN_POINTWISE_ADD, kGraphConv, kGraphB, s.relu ? kGraphBiased : kGraphY);
  if (s.relu) g.pointwise(CUDNN_POINTWISE_RELU_FWD, s.bias ? kGraphBiased : kGraphConv, -1, kGraphY);
}

void build_conv_wgrad_graph(CudnnGraph& g, const ConvShape& s, int64_t channels, DType t) {
  const cudnnDataType_t io = cudnn_type(t);
  const int64_t n = s.batch, k = s.filters;
  g.tensor({kGraphX, io, {n, channels, s.h, s.w}, nhwc_strides(n, channels, s.h, s.w), false});
  g.tensor({kGraphY, io, {n, k, s.oh, s.ow}, nhwc_strides(n, k, s.oh, s.ow), false});
  g.tensor({kGraphW, io, {k, channels, s.kh, s.kw}, nhwc_strides(k, channels, s.kh, s.kw), false});
  g.conv_wgrad(kGraphX, kGraphY, kGraphW, graph_conv(s));
}

namespace {

std::atomic<int> g_fused{0};  // fused_convolutions()
std::atomic<int> g_wgrad{0};  // graph_wgrads()

// Fused graphs timed on a cold start: the heuristics' first configurations that build. Each
// build of a runtime-compiled engine compiles a kernel (NVRTC, 0.3-1.2 s on an H200 the first
// time), so a longer list costs seconds. Of the first three, the third never ran more than 3%
// faster than the better of the first two on cifar10_cnn's and vgg11's convolutions at batch 256
// (H200, bf16).
constexpr int kFusedPlans = 2;
// Filter-gradient graphs timed on a cold start: the heuristics' first kWgradPlans precompiled
// configurations. The best of vgg11_bn_cifar's bf16 shapes at batch 256 (H200) came 4th (the stem:
// 43.2 us against 54.1 for the 2nd and 97.6 for the legacy choice) and 6th (256 channels at 8 x 8:
// 43.3 us against 51.4 for the 1st), none runtime-compiled; the one runtime-compiled engine among
// them (128 channels at 8 x 8) took 170 ms of the cold start to build and was not the fastest.
constexpr int kWgradPlans = 8;

// "-1" (the convolution and our bias/relu kernel were faster) or the configuration's index in the
// heuristics' ranking; -2 for anything else (measured again).
int decode_fused(const std::string& text) {
  std::istringstream in(text);
  int v = 0;
  std::string rest;
  if (!(in >> v) || (in >> rest) || v < -1 || v > 4096) return -2;
  return v;
}

}  // namespace

FusionMode fusion_mode() {
  const char* v = std::getenv("TRAINER_CUDNN_FUSION");
  const std::string m = v ? v : "";
  if (m.empty() || m == "auto") return FusionMode::automatic;
  if (m == "off") return FusionMode::off;
  if (m == "on") return FusionMode::on;
  static std::once_flag warned;
  std::call_once(
      warned, [&] { spdlog::warn("TRAINER_CUDNN_FUSION={} is not one of off, auto, on: taken as auto", m); });
  return FusionMode::automatic;
}

int fused_convolutions() { return g_fused.load(); }
int graph_wgrads() { return g_wgrad.load(); }

// What choose_fused and choose_wgrad share (cudnn_conv.h).
std::unique_ptr<CudnnGraph> CudnnConv::choose_graph(
    const std::string& what, const std::string& label, const std::string& disk_key, int plans,
    bool precompiled_only, size_t max_ws, const std::function<void(CudnnGraph&)>& build,
    const std::vector<size_t>& buffers, size_t baseline_ws,
    const std::function<GraphPointers(void* const*)>& ptrs,
    const std::function<void(void* const*, void*)>& baseline) {
  const FusionMode mode = fusion_mode();
  if (mode == FusionMode::off) return nullptr;
  const auto t0 = Clock::now();
  std::string stored;
  const int stored_choice =
      mode == FusionMode::automatic && conv_algo_cache().get(disk_key, &stored) ? decode_fused(stored) : -2;
  if (stored_choice == -1) return nullptr;
  const auto refuse = [&] {
    if (mode == FusionMode::automatic) conv_algo_cache().put(disk_key, "-1");
    return nullptr;
  };
  auto g = std::make_unique<CudnnGraph>(be_.cudnn());
  std::string why, json;
  if (stored_choice >= 0 && fused_plan_cache().get(disk_key, &json)) {
    if (g->load_plan(json, max_ws, &why)) {
      spdlog::debug("{}: {} ({}) from {}, loaded in {:.1f} ms", what, label, g->plan_name(0),
                    fused_plan_cache().path(), ms_since(t0));
      return g;
    }
    spdlog::debug("{}: {}: {}; building it again", what, label, why);
  }
  int n = 0;
  g = std::make_unique<CudnnGraph>(be_.cudnn());  // a fresh one: a refused stored plan leaves nothing
  try {
    build(*g);
    n = g->finalize(&why);
  } catch (const RuntimeError& e) {
    why = e.what();
  }
  if (n == 0) {
    spdlog::debug("{}: no {}: {}", what, label, why);
    return refuse();
  }
  if (stored_choice >= 0 && stored_choice < n && g->make_plan(stored_choice, max_ws, &why)) {  // selects it
    spdlog::debug("{}: {} ({}) from {}, built in {:.1f} ms", what, label, g->plan_name(0),
                  conv_algo_cache().path(), ms_since(t0));
    return g;
  }
  if (g->make_plans(plans, max_ws, &why, precompiled_only) < plans && !why.empty())
    spdlog::debug("{}: {}: {}", what, label, why);
  const double build_ms = ms_since(t0);
  if (g->plan_count() == 0) return refuse();
  try {
    MeasureBuffers buf(be_.allocator());
    std::vector<void*> b;
    for (size_t bytes : buffers) {
      b.push_back(buf.take(bytes, what + ": timing " + label));
      be_.zero(b.back(), bytes);
    }
    const size_t ws_bytes = std::max(baseline_ws, g->max_plan_workspace());
    void* ws = ws_bytes ? buf.take(ws_bytes, what + ": timing " + label + " (scratch)") : nullptr;
    const GraphPointers graph_ptrs = ptrs(b.data());
    // Each plan once, eagerly: one that cannot run here says so now.
    std::vector<int> runs;
    for (int p = 0; p < g->plan_count(); ++p) {
      g->select(p);
      const cudnnStatus_t st = g->try_run(graph_ptrs, ws);
      if (st == CUDNN_STATUS_SUCCESS)
        runs.push_back(p);
      else
        spdlog::debug("{}: {}: {} does not run: {}", what, label, g->plan_name(p), cudnnGetErrorString(st));
    }
    CUDA_CHECK(cudaStreamSynchronize(be_.stream()));
    CUDA_CHECK(cudaGetLastError());
    if (runs.empty()) return refuse();
    if (mode == FusionMode::on) {  // untimed, not kept
      g->select(runs[0]);
      spdlog::debug("{}: {} ({}): TRAINER_CUDNN_FUSION=on", what, label, g->plan_name(runs[0]));
      return g;
    }
    const Fastest f = fastest_candidate(be_.stream(), 1 + runs.size(), [&](size_t i) {
      if (i == 0) {
        baseline(b.data(), ws);
        return;
      }
      g->select(runs[i - 1]);
      g->run(graph_ptrs, ws);
    });
    std::string times;
    for (size_t i = 1; i < f.each.size(); ++i)
      times += fmt::format("{}{} {:.1f} us", i > 1 ? ", " : "", g->plan_name(runs[i - 1]), f.each[i] * 1e3f);
    spdlog::debug("{}: {}: without {:.1f} us, {}; {} ({:.0f} ms, building {:.0f})", what, label,
                  f.each[0] * 1e3f, times, f.index > 0 ? "taken" : "not taken", ms_since(t0), build_ms);
    if (f.index == 0) return refuse();
    g->select(runs[f.index - 1]);
    conv_algo_cache().put(disk_key, std::to_string(g->plan_config(g->selected())));
    json = g->plan_json(g->selected());
    if (!json.empty()) fused_plan_cache().put(disk_key, json);
  } catch (const OutOfMemoryError& e) {
    spdlog::debug("{}: timing {} does not fit ({}); not taken", what, label, e.what());
    return nullptr;
  } catch (const RuntimeError& e) {
    spdlog::debug("{}: {}: {}; not taken", what, label, e.what());
    return nullptr;
  }
  return g;
}

// The fused graph takes the bias and relu into the convolution's epilogue: one pass over y
// instead of two (the convolution writes y, the bias kernel reads and writes it again), and the
// sums stay in f32 until the one rounding to 16 bits. Whether that is faster depends on the
// engine cuDNN builds for the graph against the one its legacy call takes, so it is timed.
void CudnnConv::choose_fused(const std::string& what, const ConvShape& s, const std::string& shape_key,
                             size_t x_bytes, size_t w_bytes, size_t y_bytes, size_t max_ws) {
  const std::string flags = std::string(s.bias ? " + bias" : "") + (s.relu ? " + relu" : "");
  const std::string disk_key =
      gpu_identity(be_.device()) + " fused" + flags + " " + shape_key + std::to_string(max_ws);
  const int64_t count = s.batch * s.filters * s.oh * s.ow;
  std::unique_ptr<CudnnGraph> g = choose_graph(
      what, "fused conv" + flags, disk_key, kFusedPlans, false, max_ws,
      [&](CudnnGraph& graph) { build_conv_forward_graph(graph, s, cp_ * groups_, dtype_); },
      {x_bytes, w_bytes, y_bytes, size_t(s.filters) * sizeof(float)}, fwd_ws_,
      [&](void* const* b) {
        GraphPointers p = {{kGraphX, b[0]}, {kGraphW, b[1]}, {kGraphY, b[2]}};
        if (s.bias) p.add(kGraphB, b[3]);
        return p;
      },
      [&](void* const* b, void* ws) {
        CUDNN_CHECK(cudnnConvolutionForward(be_.cudnn(), &kOne, x_desc_, b[0], w_desc_, b[1],
                                            conv_desc_[kFwd], fwd_algo_, ws, fwd_ws_, &kZero, y_desc_, b[2]));
        if (s.bias)
          launch_bias_add(dtype_, b[2], static_cast<const float*>(b[3]), s.batch, s.filters, s.oh * s.ow,
                          true, be_.stream(), s.relu);
        else
          launch_eltwise_forward(Eltwise::relu, 0.f, dtype_, b[2], b[2], count, be_.stream());
      });
  if (!g) return;
  fused_bias_ = s.bias;
  fused_relu_ = s.relu;
  scratch_bytes_ = align_up(std::max(scratch_bytes_, g->plan_workspace(g->selected())));
  fused_ = std::move(g);
  ++g_fused;
}

// The filter gradient: the legacy API reaches a few of cuDNN's engines (the heuristics rank
// them, bf16 takes the first), the graph API's heuristics list more, with their knobs (split
// over the reduction among them). Both write the same 16-bit (K, R, S, C) gradient, which
// backward_filter then converts, so only the engine differs.
void CudnnConv::choose_wgrad(const std::string& what, const ConvShape& s, const std::string& shape_key,
                             size_t x_bytes, size_t w_bytes, size_t y_bytes, size_t max_ws) {
  const std::string disk_key = gpu_identity(be_.device()) + " wgrad " + shape_key + std::to_string(max_ws);
  std::unique_ptr<CudnnGraph> g = choose_graph(
      what, "filter-gradient graph", disk_key, kWgradPlans, true, max_ws,
      [&](CudnnGraph& graph) { build_conv_wgrad_graph(graph, s, cp_ * groups_, dtype_); },
      {x_bytes, y_bytes, w_bytes}, bwd_filter_ws_,
      [&](void* const* b) {
        return GraphPointers{{kGraphX, b[0]}, {kGraphY, b[1]}, {kGraphW, b[2]}};
      },
      [&](void* const* b, void* ws) {
        CUDNN_CHECK(cudnnConvolutionBackwardFilter(be_.cudnn(), &kOne, x_desc_, b[0], y_desc_, b[1],
                                                   conv_desc_[kBwdFilter], bwd_filter_algo_, ws,
                                                   bwd_filter_ws_, &kZero, w_desc_, b[2]));
      });
  if (!g) return;
  scratch_bytes_ = align_up(std::max(scratch_bytes_, g->plan_workspace(g->selected())));
  wgrad_ = std::move(g);
  ++g_wgrad;
}

}  // namespace trainer::cuda
