// Direct convolutions for small f32 NCHW layers: one sample's whole input window and a tile of
// filters sit in shared memory, and each thread accumulates four output channels of one pixel.
// cuDNN's general algorithms spend 25-45 microseconds on each direction of the PyTorch MNIST
// example's 5x5 convolutions (H100, strict fp32: legacy wgrad_alg0_engine, implicit_convolve_sgemm,
// an xmma dgrad at 2 TFLOP/s); these take a few, and fuse the bias (forward) and the bias
// gradient (backward-filter). CudnnConv times them against its cuDNN choice once per shape and
// keeps the faster (cudnn_conv.cc); they take groups 1 and dilation 1, any stride and padding
// (backward-data: stride 1), when the window and the filter tile fit in shared memory.
//   x, dx: (N, C, H, W)  W, dW: (K, C, R, S)  bias, db: (K)  y, dy: (N, K, OH, OW), all f32 NCHW
// Deterministic: every sum runs in a fixed order (the filter gradient in per-block partial sums
// in the scratch, then added over the blocks in block order).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace trainer::cuda {

struct DirectConvGeometry {
  int64_t n = 0, c = 0, h = 0, w = 0;  // x
  int64_t k = 0, r = 0, s = 0;         // W
  int64_t sh = 1, sw = 1;              // strides
  int64_t pad_top = 0, pad_left = 0;   // padding before the first row and column (any after)
  int64_t oh = 0, ow = 0;              // y
};

// One correlation a block grid runs: out[n][o][p][q] = sum over (i, r, s) of
// window[n][i][p * sh + r][q * sw + s] * filter[i, r, s][o] (+ bias[o]), the window starting at
// row -top, column -left of the input, zero outside it. Forward: the input is x, the filter W.
// Backward-data: the input is dy, padded by (R - 1 - top, S - 1 - left), the filter W transposed
// (K and C swapped) and flipped in both spatial dims.
struct Correlation {
  int n = 0, in_c = 0, in_h = 0, in_w = 0;  // the input
  int out_c = 0, r = 0, s = 0, sh = 1, sw = 1;
  int top = 0, left = 0;     // the window's origin in the input
  int win_h = 0, win_w = 0;  // (OH - 1) * sh + R, (OW - 1) * sw + S
  int oh = 0, ow = 0;        // the output
  int plane = 0;             // the window's channel stride in shared memory: odd, so that
                             // threads reading different channels hit different banks
  int tile = 0;              // output channels a block computes (a multiple of 4)
  int split = 1;             // threads (adjacent lanes) that share one output's input channels
  bool transposed = false;   // the filter from W as backward-data reads it
  size_t smem = 0;           // dynamic shared memory a block takes
  bool fits = false;
};

// The filter gradient: block (g, t) sums samples [g * per_block, ...) of filters
// [t * tile, ...) into partial sums, a second kernel adds them over the blocks in order.
struct FilterGradPlan {
  int n = 0, c = 0, h = 0, w = 0, k = 0, r = 0, s = 0, sh = 1, sw = 1, top = 0, left = 0;
  int oh = 0, ow = 0, win_h = 0, win_w = 0, plane = 0;
  int tile = 0, per_block = 0, blocks = 0;  // blocks: sample groups
  int slices = 1;                           // adjacent lanes that split one item's pixels
  size_t smem = 0, scratch_bytes = 0;       // scratch: blocks x K x (C R S + 1) floats
  bool fits = false;
};

class DirectConv {
 public:
  // Plans the three directions for this geometry on `device` (shared memory limit, SM count).
  DirectConv(const DirectConvGeometry& g, int device);

  bool forward_fits() const { return fwd_.fits; }
  bool backward_data_fits() const { return bwd_data_.fits; }
  bool backward_filter_fits() const { return bwd_filter_.fits; }
  // Scratch backward_filter needs (partial sums); 0 when it does not fit.
  size_t scratch_bytes() const { return bwd_filter_.fits ? bwd_filter_.scratch_bytes : 0; }

  // y = conv(x, W) (+ bias when not null), overwritten.
  void forward(const float* x, const float* w, const float* bias, float* y, cudaStream_t stream) const;
  // dx overwritten.
  void backward_data(const float* dy, const float* w, float* dx, cudaStream_t stream) const;
  // dW (and db when not null) overwritten; scratch: scratch_bytes().
  void backward_filter(const float* x, const float* dy, float* dw, float* db, void* scratch,
                       cudaStream_t stream) const;

 private:
  Correlation fwd_, bwd_data_;
  FilterGradPlan bwd_filter_;
};

}  // namespace trainer::cuda
