// One 2-D cuDNN cross-correlation (NCHW) with any padding, planned once per batch size, and
// the conv layer kernel built on it: conv2d uses it as is, conv1d as H = 1.
//   - descriptors and the forward / backward-data / backward-filter algorithms are chosen in the
//     constructor: every algorithm of cuDNN's list timed as a step runs it (once per shape per
//     process, on buffers from the backend's allocator, freed again; kept on disk across
//     processes), or with ctx.deterministic from cudnnGet*Algorithm_v7
//     heuristics keeping only algorithms cuDNN reports as deterministic; strict fp32 sets FMA
//     math and skips tensor-core (TF32) results, tf32 allows them; each algorithm's scratch is at
//     most 256 MiB (1/8 of a --mem-limit cap) and comes from the kernel's workspace,
//     which is transient (one region shared by all such kernels of a step);
//   - asymmetric padding (TensorFlow "same" with an even kernel or a stride), which a cuDNN
//     descriptor cannot express, pads the input explicitly into the workspace (pad2d.cu) and
//     convolves with no padding; backward-data goes to that buffer and is cropped into dx.
//   - in 16-bit math a convolution whose layer adds a bias and/or applies a fused relu is timed
//     against cuDNN's fused graph relu(conv + b) (cudnn_graph.h, choose_fused), which then
//     replaces the convolution and our bias/relu kernel (its serialized plan kept on disk); and
//     the filter gradient's legacy algorithm against the graph API's engines for it
//     (choose_wgrad), whose configurations the legacy list does not reach (vgg11_bn_cifar's
//     stem: 97.6 us with the heuristics' legacy choice, 43.2 with the graph's fourth);
// forward/backward only launch work on the backend's stream (no allocation, no descriptor, no
// sync; a fused graph's variant pack is made on its first call and reused). No bias in CudnnConv: the layer
// kernel (make_cudnn_conv_layer) adds it (bias.cu). Activations in ctx.act_dtype: with bf16 (or fp16) x, y
// and their gradients are bf16 and stored channels-last (NHWC, the layout cuDNN's tensor-core kernels want:
// in NCHW cuDNN 9 ran bf16 convolutions slower than TF32 ones), the algorithms compute in f32, and the f32
// weights are converted to bf16 (K, R, S, C) once a step, by forward, into the kept workspace that the input
// gradient reads again (cuDNN takes one dtype for x, W and y); dW comes out in bf16 (K, R, S, C)
// and is converted into the f32
// gradient (K, C, R, S). The layer kernel converts plain neighbours at its edges.
//   x, dx: (B, C, H, W)  W, dW: (F, C, kh, kw) f32  y, dy: (B, F, OH, OW); NHWC storage in low
//   precision
//   workspace: [padded x, only when asymmetric] [dW in the activation dtype, only when it is not
//   f32] [cuDNN scratch]; kept (the layer's own for the step): W in the activation dtype
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cudnn_graph.h"
#include "kernels/cuda/cudnn_util.h"
#include "kernels/cuda/direct_conv.cuh"
#include "kernels/cuda/pad2d.cuh"

namespace trainer::cuda {

struct ConvShape {
  int64_t batch = 0, channels = 0, h = 0, w = 0;        // x
  int64_t filters = 0, kh = 1, kw = 1, sh = 1, sw = 1;  // W and strides
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int64_t oh = 0, ow = 0;  // y, as the layer inferred it (checked against cuDNN)
  int64_t groups = 1;      // W: (F, C/groups, kh, kw); cuDNN's group count
  // What forward applies after the convolution: the layer's bias and a fused relu
  // (KernelContext::fused_relu). In 16-bit math a fused cuDNN graph may take them into the
  // convolution's epilogue (CudnnConv::choose_fused).
  bool bias = false, relu = false;
};

// The fused forward graph y = [relu](conv(x, W) [+ b]) in cuDNN's graph API: x, W and y in the
// 16-bit dtype t, channels-last, W as (K, R, S, C) with `channels` (padded) input channels; b
// f32 (K); the sums in f32 before the one rounding to t. Tensors by these ids.
enum ConvGraphId : int64_t {
  kGraphX = 1,
  kGraphW = 2,
  kGraphB = 3,
  kGraphY = 4,
  kGraphConv = 5,
  kGraphBiased = 6
};
void build_conv_forward_graph(CudnnGraph& g, const ConvShape& s, int64_t channels, DType t);
// The filter gradient dW = wgrad(x, dy) in the graph API: x (kGraphX) and dy (kGraphY) in the
// 16-bit dtype t, channels-last; dW (kGraphW) in t as (K, R, S, C), `channels` (padded) input
// channels: what CudnnConv's legacy call writes before converting it into the f32 gradient.
void build_conv_wgrad_graph(CudnnGraph& g, const ConvShape& s, int64_t channels, DType t);

class CudnnConv {
 public:
  // what: names the layer in errors, e.g. "conv1d 'conv1d_1'".
  CudnnConv(CudaBackend& be, const ConvShape& s, const KernelContext& ctx, const std::string& what);
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  // kept: kept_bytes() that live from forward to backward (LayerKernel::kept_workspace_bytes);
  // required when kept_bytes() > 0 (InternalError otherwise). low: the executor's 16-bit copy of
  // W laid out (K, R, S, C), required when reads_low_weights().
  void bind(void* workspace, void* kept, const void* low = nullptr);
  // W in 16 bits comes from the executor's copy (KernelContext::low_precision_params), which the
  // optimizer's step writes in (K, R, S, C) (LayerKernel::low_param_krsc), instead of a
  // conversion by every forward into the kept workspace: 16-bit, groups 1, channels a multiple
  // of 8 (a padded stem converts its own).
  bool reads_low_weights() const { return low_w_; }
  void filter_dims(LowFilterLayout* f) const {
    f->k = k_;
    f->c = c_;
    f->r = r_;
    f->s = s_;
  }

  size_t workspace_bytes() const { return padded_bytes_ + weight_bytes_ + scratch_bytes_; }
  // W in the activation dtype, converted by forward and read again by the input gradient (0 in
  // f32): vgg11_bn_cifar's bf16 step converted its filters 15 times, now 8.
  size_t kept_bytes() const { return low_w_ ? 0 : weight_bytes_; }
  // x, y, dy, dx: the activation dtype. y = conv(x, W) (overwritten); returns true when it also
  // added `bias` (not null) and applied the relu (`relu`: a relu fused after the layer) itself
  // (the direct kernel fuses both), false when the caller must.
  bool forward(const void* x, const float* w, void* y, const float* bias = nullptr, bool relu = false);
  // dW (overwritten) and, when dx is not null, dx (overwritten, or added to with accumulate_dx:
  // only where accumulates_dx()); returns true when it also wrote db (not null: the direct kernel
  // fuses the bias gradient), false when the caller must. relu_z: a fused relu's output, through
  // whose mask the directions read dy (only where masks_relu says they can).
  bool backward(const void* x, const float* w, const void* dy, float* dw, void* dx, float* db = nullptr,
                const float* relu_z = nullptr, bool accumulate_dx = false);
  // Whether backward can add dx to what is there: cuDNN's input gradient (beta = 1) straight into
  // dx, not our direct kernel nor a padded copy.
  bool accumulates_dx() const { return !asym_ && !direct_bwd_data_; }
  // Every direction backward runs (the input gradient with `dx`) is our own kernel, which can read
  // dy through a fused relu's mask; otherwise the caller masks dy first.
  bool masks_relu(bool dx) const { return direct_bwd_filter_ && (!dx || direct_bwd_data_); }
  DType dtype() const { return dtype_; }
  // x, y and their gradients are NHWC (low precision), else NCHW.
  bool nhwc() const { return nhwc_; }
  // The input channels cuDNN sees: in NHWC a count that is not a multiple of 8 (an image's 1 or 3)
  // is padded with zero channels up to one, so that the tensor-core kernels apply (unpadded,
  // cuDNN 9 ran its legacy wgrad_alg0_engine: 4.5 ms of vgg11_bn_cifar's 10 ms bf16 step).
  int64_t core_channels() const { return cp_ * groups_; }

 private:
  const void* padded_input(const void* x);
  // cuDNN's backward-filter (dW overwritten) and backward-data (dx overwritten).
  void backward_filter(const void* x, const void* dy, float* dw);
  void backward_data(const float* w, const void* dy, void* dx, bool accumulate = false);
  // W in the activation dtype (W itself when that is f32): converted by forward, read as it is by
  // the input gradient.
  const void* typed_weights(const float* w, bool forward);

 public:
  // The algorithm and math type chosen for each direction.
  struct Chosen {
    cudnnConvolutionFwdAlgo_t fwd{};
    cudnnConvolutionBwdDataAlgo_t bwd_data{};
    cudnnConvolutionBwdFilterAlgo_t bwd_filter{};
    cudnnMathType_t fwd_math{}, bwd_data_math{}, bwd_filter_math{};
    // Each direction's measured milliseconds (forward, backward-data, backward-filter), -1 where
    // not measured in this process (heuristics, the disk cache).
    float ms[3] = {-1.f, -1.f, -1.f};
  };

 private:
  enum Direction { kFwd, kBwdData, kBwdFilter };
  // measure: KernelContext::measure (false: cuDNN's heuristic ranking, unless nothing it ranks
  // fits the scratch bound).
  void choose_algorithms(const std::string& what, bool deterministic, bool measure, bool strict,
                         const std::string& shape_key, size_t x_bytes, size_t w_bytes, size_t y_bytes);
  bool measure_algorithms(const std::string& what, bool deterministic, bool strict, size_t max_ws,
                          const std::string& shape_key, size_t x_bytes, size_t w_bytes, size_t y_bytes,
                          Chosen* out);
  Chosen heuristic_algorithms(const std::string& what, bool deterministic, bool strict, size_t max_ws);
  void reset_math(bool strict);
  // 16-bit, groups 1, symmetric padding, not --deterministic, a bias or a relu to apply: times
  // cuDNN's fused conv + bias + relu graphs (the heuristics' first kFusedPlans that build) against
  // the convolution and our bias/relu kernel, keeps the faster (on disk too).
  void choose_fused(const std::string& what, const ConvShape& s, const std::string& shape_key, size_t x_bytes,
                    size_t w_bytes, size_t y_bytes, size_t max_ws);
  // The same conditions but the bias and relu: times the filter-gradient graph's first kWgradPlans
  // configurations against the legacy algorithm chosen, keeps the faster (on disk too).
  void choose_wgrad(const std::string& what, const ConvShape& s, const std::string& shape_key, size_t x_bytes,
                    size_t w_bytes, size_t y_bytes, size_t max_ws);
  // What both share: under TRAINER_CUDNN_FUSION's mode, the stored choice for disk_key (its plan
  // from the plan cache, or built again from the stored configuration), else the heuristics' first
  // `plans` configurations that build (precompiled_only: of the engines cuDNN does not compile at
  // run time), each run once, then timed with `baseline` as candidate 0,
  // on zeroed buffers of the given bytes (passed in that order to `ptrs` and `baseline`) and one
  // scratch of the largest workspace (baseline_ws at least). Returns the faster graph with its
  // plan selected, or null where the baseline won or nothing builds and runs. `label` names the
  // graph in the debug log.
  std::unique_ptr<CudnnGraph> choose_graph(const std::string& what, const std::string& label,
                                           const std::string& disk_key, int plans, bool precompiled_only,
                                           size_t max_ws, const std::function<void(CudnnGraph&)>& build,
                                           const std::vector<size_t>& buffers, size_t baseline_ws,
                                           const std::function<GraphPointers(void* const*)>& ptrs,
                                           const std::function<void(void* const*, void*)>& baseline);
  // Times the direct kernels (direct_conv.cuh) against the chosen cuDNN algorithms, each
  // direction where they fit, and keeps the faster: f32 NCHW, groups 1, not --deterministic.
  void choose_direct(const std::string& what, const std::string& shape_key, size_t x_bytes, size_t w_bytes,
                     size_t y_bytes);
  void prefer_recommended(const std::string& what, bool strict, size_t max_ws,
                          const cudnnConvolutionFwdAlgoPerf_t* fwd, int n_fwd,
                          const cudnnConvolutionBwdDataAlgoPerf_t* bd, int n_bd,
                          const cudnnConvolutionBwdFilterAlgoPerf_t* bf, int n_bf, Chosen* c);
  Chosen ranked(const std::string& what, bool deterministic, bool strict, size_t max_ws,
                const cudnnConvolutionFwdAlgoPerf_t* fwd, int n_fwd,
                const cudnnConvolutionBwdDataAlgoPerf_t* bd, int n_bd,
                const cudnnConvolutionBwdFilterAlgoPerf_t* bf, int n_bf);

  CudaBackend& be_;
  DType dtype_ = DType::f32;
  bool nhwc_ = false;
  int64_t w_elems_ = 0;
  int64_t k_ = 0, c_ = 0, r_ = 0, s_ = 0;  // the filter's dims (c_: channels per group)
  int64_t cp_ = 0, groups_ = 1;            // c_ padded (see core_channels)
  bool asym_ = false;
  PadGeometry pad_;
  TensorDesc x_desc_, y_desc_;
  FilterDesc w_desc_;
  ConvDesc conv_desc_[3];  // per Direction: each carries its algorithm's math type
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo_{};
  size_t fwd_ws_ = 0, bwd_data_ws_ = 0, bwd_filter_ws_ = 0, scratch_bytes_ = 0, padded_bytes_ = 0;
  float chosen_ms_[3] = {-1.f, -1.f, -1.f};  // Chosen::ms of the algorithms chosen
  size_t weight_bytes_ = 0;                  // W (kept) or dW (transient) in the activation dtype (0 in f32)
  void* xpad_ = nullptr;
  void* w_typed_ = nullptr;  // the kept workspace, written by this step's forward
  void* dw_typed_ = nullptr;
  void* scratch_ = nullptr;
  std::unique_ptr<DirectConv> direct_;  // planned when the shape may take it
  std::unique_ptr<CudnnGraph> fused_;   // conv + bias + relu in one graph, when it won
  std::unique_ptr<CudnnGraph> wgrad_;   // the filter gradient's graph, when it won
  bool fused_bias_ = false, fused_relu_ = false;
  bool low_w_ = false;  // reads_low_weights()
  double macs_ = 0;     // multiply-adds of one direction over the batch
  bool direct_fwd_ = false, direct_bwd_data_ = false, direct_bwd_filter_ = false;
};

// TRAINER_CUDNN_FUSION, for the graph API's plans (fused conv + bias + relu, filter-gradient
// engines): "off" takes none, "on" takes a graph wherever one builds and runs, untimed and not
// kept on disk (tests, and comparing the paths); unset or "auto" (the default): timed, the faster
// kept. Another value: a warning, then auto.
enum class FusionMode { off, automatic, on };
FusionMode fusion_mode();
// Filter-gradient graphs CudnnConv took in this process (choose_wgrad), for tests.
int graph_wgrads();
// Convolutions made in this process that took a fused graph (tests).
int fused_convolutions();

// The conv layer kernel (conv1d, conv2d): y = conv(x, W) [+ b]; W and b (only when `bias`) are the
// parameter views 0 and 1. Backward overwrites dW and db, dx may be null. The workspace is the
// CudnnConv's.
std::unique_ptr<LayerKernel> make_cudnn_conv_layer(const ConvShape& s, bool bias, const KernelContext& ctx,
                                                   const std::string& what);

}  // namespace trainer::cuda
