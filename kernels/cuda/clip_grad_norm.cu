#include "kernels/cuda/clip_grad_norm.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "lib/core/clip_formula.h"

namespace trainer::cuda {
namespace {

constexpr int kBlock = 256;

// Sums v over the block in a fixed tree order; the total is valid in thread 0.
__device__ double block_sum(double v, double* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  return shared[0];
}

// One block per partial: the squares of its chunk.
__global__ void sum_squares_kernel(const float* g, int64_t n, double* partials) {
  __shared__ double shared[kBlock];
  const int64_t begin = clip_chunk_begin(n, blockIdx.x, kClipPartials);
  const int64_t end = clip_chunk_begin(n, blockIdx.x + 1, kClipPartials);
  double sq = 0;
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) sq += double(g[j]) * double(g[j]);
  const double total = block_sum(sq, shared);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

// One block: thread t sums partial t of every group in group order, then the tree sum, the norm
// and the factor (with one group: the total of the partials, in the tree's order).
// s (not null): bit ORed into s->nonfinite when the norm is not finite.
__global__ void clip_factor_groups_kernel(const double* partials, int groups, float max_norm,
                                          ClipRecord* record, StepScalars* s = nullptr, uint32_t bit = 0) {
  __shared__ double shared[kClipPartials];
  double v = 0;
  for (int j = 0; j < groups; ++j) v += partials[int64_t(j) * kClipPartials + threadIdx.x];
  const double total = block_sum(v, shared);
  if (threadIdx.x != 0) return;
  const double norm = sqrt(total);
  if (s && !isfinite(norm)) atomicOr(&s->nonfinite, bit);
  const float scale = clip_factor(norm, max_norm);
  record->last_norm = float(norm);
  record->last_scale = scale;
  if (scale != 1.f) record->clipped_steps += 1;
}

__global__ void scale_kernel(float* g, int64_t n, const ClipRecord* record) {
  const float scale = record->last_scale;
  if (scale == 1.f) return;
  for (int64_t i = global_index(); i < n; i += grid_stride()) g[i] *= scale;
}

}  // namespace

void launch_clip_sum_squares(const float* g, int64_t n, double* partials, cudaStream_t stream) {
  sum_squares_kernel<<<kClipPartials, kBlock, 0, stream>>>(g, n, partials);
  CUDA_CHECK_LAUNCH();
}

void launch_clip_by_partials(float* g, int64_t n, float max_norm, const double* partials, int groups,
                             ClipRecord* record, cudaStream_t stream) {
  clip_factor_groups_kernel<<<1, kClipPartials, 0, stream>>>(partials, groups, max_norm, record);
  CUDA_CHECK_LAUNCH();
  scale_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, n, record);
  CUDA_CHECK_LAUNCH();
}

void launch_clip_grad_norm(float* g, int64_t n, float max_norm, double* partials, ClipRecord* record,
                           cudaStream_t stream) {
  static_assert(kClipPartials % 32 == 0 && kClipPartials <= 1024, "one block reduces the partials");
  launch_clip_sum_squares(g, n, partials, stream);
  launch_clip_by_partials(g, n, max_norm, partials, /*groups=*/1, record, stream);
}

void launch_clip_norm_only(const float* g, int64_t n, float max_norm, double* partials, ClipRecord* record,
                           StepScalars* s, uint32_t bit, cudaStream_t stream) {
  launch_clip_sum_squares(g, n, partials, stream);
  clip_factor_groups_kernel<<<1, kClipPartials, 0, stream>>>(partials, /*groups=*/1, max_norm, record, s,
                                                             bit);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
