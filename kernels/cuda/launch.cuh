// Launch helpers shared by the hand-written kernels (only included from .cu files):
// grid sizes for grid-stride loops and warp-level reductions.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace trainer::cuda {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n elements: enough to fill any current GPU, and never
// more than the elements need (n = 0 still launches one block, which does nothing).
inline unsigned grid_for(int64_t n, int threads = kThreads) {
  const int64_t blocks = (n + threads - 1) / threads;
  const int64_t max_blocks = int64_t(132) * 32;  // SMs x resident blocks, generously
  return unsigned(blocks < 1 ? 1 : (blocks > max_blocks ? max_blocks : blocks));
}

__device__ __forceinline__ int64_t global_index() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t grid_stride() { return int64_t(gridDim.x) * blockDim.x; }

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
