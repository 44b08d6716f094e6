// Launch helpers shared by the hand-written kernels (only included from .cu files):
// grid sizes for grid-stride loops and warp-level reductions.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

namespace trainer::cuda {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements: enough to fill any current GPU, and never
// more than the elements need (n = 0 still launches one block, which does nothing).
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  const int64_t blocks = (n + threads - 1) / threads;
  const int64_t max_blocks = int64_t(132) * 32;  // SMs x resident blocks, generously
  return unsigned(blocks < 1 ? 1 : (blocks > max_blocks ? max_blocks : blocks));
}

// A channels-last reduction over n rows (batchnorm statistics, bias gradients): each 32-channel
// tile is split into `parts` blocks of part_len rows, with at least rows_per_thread rows a thread
// (8 row phases a block) and about 1024 blocks in all at most.
struct RowSplit {
  int64_t parts = 1, part_len = 1;
};
inline RowSplit channels_last_row_split(int64_t n, int64_t channels, int64_t rows_per_thread) {
  const int64_t tiles = std::max<int64_t>(1, (channels + 31) / 32);
  const int64_t by_size = (n + 8 * rows_per_thread - 1) / (8 * rows_per_thread);
  RowSplit s;
  s.parts = std::max<int64_t>(1, std::min(by_size, std::max<int64_t>(1, 1024 / tiles)));
  s.part_len = std::max<int64_t>(1, (n + s.parts - 1) / s.parts);
  return s;
}

__device__ __forceinline__ int64_t global_index() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t grid_stride() { return int64_t(gridDim.x) * blockDim.x; }

// Whether a grid-stride loop over n elements (a grid from grid_for) may index in 32 bits: n and
// n + the stride below 2^31. Element-wise kernels over activations are instruction-bound with 64-bit
// index arithmetic: a 64-bit division or remainder is ~70 instructions, and a bf16 element moves
// 2 bytes (vgg11_bn_cifar's bias adds and relayouts ran at 1-1.7 TB/s on an H100).
inline bool fits_int32_loop(int64_t n) { return n < (int64_t(1) << 30); }

// f(I{}) with I = int32_t when every count passed fits_int32_loop, else int64_t: the index type a
// kernel template takes, as with_dtype gives its element type.
template <class F>
void with_index_type(std::initializer_list<int64_t> counts, F&& f) {
  bool small = true;
  for (int64_t n : counts) small = small && fits_int32_loop(n);
  if (small)
    f(int32_t{});
  else
    f(int64_t{});
}

// The channel of element i of a (B, C, S) tensor, for a thread walking i = first, first + stride,
// ...: channels-last (i = (b, s, c)) the channel advances by stride % C with no division per
// element; NCHW (i = (b, c, s)) it is (i / S) % C.
template <class I>
struct ChannelWalk {
  I channels, spatial, step, c;
  bool nhwc;
  __device__ ChannelWalk(I first, I stride, I channels_, I spatial_, bool nhwc_)
      : channels(channels_), spatial(spatial_), step(stride % channels_), c(first % channels_), nhwc(nhwc_) {}
  __device__ __forceinline__ I at(I i) const { return nhwc ? c : (i / spatial) % channels; }
  __device__ __forceinline__ void next() {
    c += step;
    if (c >= channels) c -= channels;
  }
};

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace trainer::cuda
