// One 2-D cuDNN cross-correlation (NCHW, fp32) with any padding, planned once per batch size, and
// the conv layer kernel built on it: conv2d uses it as is, conv1d as H = 1.
//   - descriptors and the forward / backward-data / backward-filter algorithms are chosen in the
//     constructor with cudnnGet*Algorithm_v7 heuristics: strict fp32 sets FMA math and skips
//     tensor-core (TF32) results, tf32 allows them; ctx.deterministic keeps only algorithms
//     cuDNN reports as deterministic; each algorithm's scratch is at most 64 MiB (1/16 of a
//     --mem-limit cap) and comes from the kernel's workspace;
//   - asymmetric padding (TensorFlow "same" with an even kernel or a stride), which a cuDNN
//     descriptor cannot express, pads the input explicitly into the workspace (pad2d.cu) and
//     convolves with no padding; backward-data goes to that buffer and is cropped into dx.
// forward/backward only launch work on the backend's stream (no allocation, no descriptor, no
// sync). No bias in CudnnConv: the layer kernel (make_cudnn_conv_layer) adds it (bias.cu).
//   x, dx: (B, C, H, W)  W, dW: (F, C, kh, kw)  y, dy: (B, F, OH, OW)
//   workspace: [padded x (B, C, H+pt+pb, W+pl+pr), only when asymmetric] [cuDNN scratch]
#pragma once

#include <memory>
#include <string>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cudnn_util.h"
#include "kernels/cuda/pad2d.cuh"

namespace trainer::cuda {

struct ConvShape {
  int64_t batch = 0, channels = 0, h = 0, w = 0;        // x
  int64_t filters = 0, kh = 1, kw = 1, sh = 1, sw = 1;  // W and strides
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int64_t oh = 0, ow = 0;  // y, as the layer inferred it (checked against cuDNN)
  int64_t groups = 1;      // W: (F, C/groups, kh, kw); cuDNN's group count
};

class CudnnConv {
 public:
  // what: names the layer in errors, e.g. "conv1d 'conv1d_1'".
  CudnnConv(CudaBackend& be, const ConvShape& s, const KernelContext& ctx, const std::string& what);
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  size_t workspace_bytes() const { return padded_bytes_ + scratch_bytes_; }
  void bind(void* workspace);

  // y = conv(x, W) (overwritten).
  void forward(const float* x, const float* w, float* y);
  // dW (overwritten) and, when dx is not null, dx (overwritten).
  void backward(const float* x, const float* w, const float* dy, float* dw, float* dx);

 private:
  const float* padded_input(const float* x);
  void choose_algorithms(const std::string& what, bool deterministic, bool strict);

  CudaBackend& be_;
  bool asym_ = false;
  PadGeometry pad_;
  TensorDesc x_desc_, y_desc_;
  FilterDesc w_desc_;
  ConvDesc conv_desc_;
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo_{};
  size_t fwd_ws_ = 0, bwd_data_ws_ = 0, bwd_filter_ws_ = 0, scratch_bytes_ = 0, padded_bytes_ = 0;
  float* xpad_ = nullptr;
  void* scratch_ = nullptr;
};

// The conv layer kernel (conv1d, conv2d): y = conv(x, W) [+ b]; W and b (only when `bias`) are the
// parameter views 0 and 1. Backward overwrites dW and db, dx may be null. The workspace is the
// CudnnConv's.
std::unique_ptr<LayerKernel> make_cudnn_conv_layer(const ConvShape& s, bool bias, const KernelContext& ctx,
                                                   const std::string& what);

}  // namespace trainer::cuda
