// Top-k hits: one thread per sample counts the classes ranked above its label (strictly larger,
// or equal with a lower index, as the CPU), then a block sums its hits and adds them with one
// atomic. Hits are small integers in float: exact, so the order of atomics does not matter.
//   out: (B, C)  labels: (B)  correct: one float
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/topk_correct.cuh"

namespace trainer::cuda {
namespace {

__global__ void topk_kernel(const float* out, const int32_t* labels, int64_t batch, int64_t classes,
                            int64_t k, float* correct) {
  __shared__ float block_hits[kThreads / 32];
  float hits = 0;
  for (int64_t i = global_index(); i < batch; i += grid_stride()) {
    const float* o = out + i * classes;
    const int32_t y = labels[i];
    const float oy = o[y];
    int64_t above = 0;
    for (int64_t c = 0; c < classes; ++c) above += (o[c] > oy) || (o[c] == oy && c < y);
    hits += above < k ? 1.f : 0.f;
  }
  hits = warp_sum(hits);
  if (threadIdx.x % 32 == 0) block_hits[threadIdx.x / 32] = hits;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0;
    for (int w = 0; w < kThreads / 32; ++w) t += block_hits[w];
    if (t != 0.f) atomicAdd(correct, t);
  }
}

}  // namespace

void launch_topk_correct(const float* out, const int32_t* labels, int64_t batch, int64_t classes, int64_t k,
                         float* correct, cudaStream_t stream) {
  if (batch <= 0) return;
  topk_kernel<<<grid_for(batch), kThreads, 0, stream>>>(out, labels, batch, classes, k, correct);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
