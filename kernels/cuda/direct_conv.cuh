// Our own convolution kernels for small f32 NCHW layers, where cuDNN's general algorithms spend
// 15-30 microseconds a direction (H100, strict fp32, the PyTorch MNIST example's and the Keras
// CIFAR tutorial's layers: legacy wgrad_alg0_engine, implicit_convolve_sgemm, an xmma dgrad at
// 2-5 TFLOP/s). Each direction is an implicit GEMM in registers (FFMA, no tensor cores):
//   forward:         y[m][o]  = sum over kk = (c, r, s) of im2col(x)[m][kk] W[o][kk] (+ bias[o])
//   backward-data:   dx[m][c] = sum over kk = (k, r, s) of im2col(dy, padded)[m][kk] W[k][c][R-1-r][S-1-s]
//   backward-filter: dW[o][kk] = sum over m of dy[m][o] im2col(x)[m][kk]; db[o] = sum over m of dy[m][o]
// with m = (n, p, q) an output pixel. 3x3 filters of stride 1 and padding 1 (the output the size of
// the input: forward, and backward-data of such a layer) also go as a direct correlation: each
// thread keeps a few rows of one output column for a few channels, reads its 3 x (rows + 2) window
// of each input channel from memory (neighbouring threads: neighbouring columns, so the window is
// read once into L1) and the filters from shared memory, with no index arithmetic in the sum.
// Each direction has a few tilings (thread tile, block tile,
// threads that split the sum inside a block); CudnnConv times every tiling and cuDNN's choice
// once per shape and keeps the fastest (conv_direct_choice.cc). Groups 1, dilation 1, any stride
// and padding (backward-data: stride 1), at most kMaxRows = 1024 values in a filter.
//   x, dx: (N, C, H, W)  W, dW: (K, C, R, S)  bias, db: (K)  y, dy: (N, K, OH, OW), all f32 NCHW
// Deterministic: every sum runs in a fixed order (the filter gradient in per-split partial sums
// in the scratch, then added over the splits in split order by a second kernel).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace trainer::cuda {

struct DirectConvGeometry {
  int64_t n = 0, c = 0, h = 0, w = 0;  // x
  int64_t k = 0, r = 0, s = 0;         // W
  int64_t sh = 1, sw = 1;              // strides
  int64_t pad_top = 0, pad_left = 0;   // padding before the first row and column (any after)
  int64_t oh = 0, ow = 0;              // y
};

// The gather both GEMM kinds read: im2col(in)[m][kk] = in[n][i][p * sh + r - top][q * sw + s - left]
// for m = (n, p, q) in (n, oh, ow) and kk = (i, r, s) in (in_c, r, s); zero outside the input.
struct Im2col {
  int n = 0, in_c = 0, in_h = 0, in_w = 0;
  int r = 0, s = 0, sh = 1, sw = 1, top = 0, left = 0;
  int oh = 0, ow = 0;
  int rows = 0;  // in_c * r * s
};

// forward / backward-data: out[m][o] = sum over kk of im2col(in)[m][kk] B[kk][o] (+ bias[o]),
// B[kk][o] = w[wrow(kk) + o * o_stride]; out is (n, out_c, oh, ow).
struct ConvGemmPlan {
  Im2col a;
  int out_c = 0;
  int o_stride = 0;         // forward: rows (W is (K, rows)); backward-data: R * S
  bool transposed = false;  // backward-data: kk = (k, r, s) reads W[k][o][R-1-r][S-1-s]
  int tiling = 0;           // index into the forward tilings (direct_conv.cu), or the 3x3 ones
  bool plane3x3 = false;    // conv3x3_kernel (3x3, stride 1, padding 1, the output the input's size)
  int grid_m = 0, grid_n = 0;
  // Split over the sum (a grid too small for the GPU): block z sums rows [z k_per_split, ...)
  // into partial[z][o][m] in the scratch; a second kernel adds the splits in order, adds the bias
  // and applies the relu.
  int splits = 1, k_per_split = 0;
  size_t scratch_bytes = 0;  // splits x out_c x M floats (splits > 1)
};

// backward-filter: partial[split][o][kk] = sum over the split's pixels m of dy[m][o] col[m][kk],
// col = im2col(x) with a last column of ones (kk = rows: the bias); then added over the splits.
struct FilterGemmPlan {
  Im2col a;
  int k = 0;       // filters
  int tiling = 0;  // index into the filter tilings (direct_conv.cu)
  int grid_kk = 0, grid_o = 0;
  int splits = 1, split_len = 0;  // pixels a split sums: a multiple of the chunk
  size_t scratch_bytes = 0;       // splits x K x (rows + 1) floats
};

class DirectConv {
 public:
  enum Direction { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };

  // Plans every tiling of the three directions that fits this geometry on `device`.
  DirectConv(const DirectConvGeometry& g, int device);

  // Tilings planned for a direction (0: the direction does not fit), and the one its calls run
  // (the first until select()).
  int tilings(Direction d) const;
  void select(Direction d, int index);
  int selected(Direction d) const { return selected_[d]; }
  std::string describe(Direction d, int index) const;  // e.g. "64x16 tile, 4-way split"

  bool forward_fits() const { return tilings(kForward) > 0; }
  bool backward_data_fits() const { return tilings(kBackwardData) > 0; }
  bool backward_filter_fits() const { return tilings(kBackwardFilter) > 0; }
  // Scratch a direction needs with its selected tiling (backward-filter: partial sums; the others
  // when split over their sum; else 0), and the most any tiling of any direction needs (for
  // timing them all).
  size_t scratch_bytes(Direction d) const;
  size_t max_scratch_bytes() const;

  // A relu fused after the convolution (KernelContext::fused_relu): the forward stores
  // z = relu(conv + bias), and the backward directions read the output gradient through its mask
  // (dz where z > 0, 0 * dz elsewhere) when given z.
  // y = conv(x, W) (+ bias when not null) (through a relu with `relu`), overwritten; scratch:
  // scratch_bytes(kForward).
  void forward(const float* x, const float* w, const float* bias, float* y, void* scratch,
               cudaStream_t stream, bool relu = false) const;
  // dx overwritten; scratch: scratch_bytes(kBackwardData).
  void backward_data(const float* dy, const float* w, float* dx, void* scratch, cudaStream_t stream,
                     const float* relu_z = nullptr) const;
  // dW (and db when not null) overwritten; scratch: scratch_bytes(kBackwardFilter).
  void backward_filter(const float* x, const float* dy, float* dw, float* db, void* scratch,
                       cudaStream_t stream, const float* relu_z = nullptr) const;

 private:
  std::vector<ConvGemmPlan> fwd_, bwd_data_;
  std::vector<FilterGemmPlan> bwd_filter_;
  int selected_[3] = {0, 0, 0};
};

}  // namespace trainer::cuda
