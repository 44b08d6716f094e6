// Random crop and flip (see augment.cuh).
#include "kernels/cuda/augment.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"

namespace trainer::cuda {
namespace {

__global__ void augment_kernel(AugmentSpec spec, const float* in, float* out, int64_t batch,
                               const StepScalars* s) {
  const int64_t plane = spec.height * spec.width, sample = spec.channels * plane, n_all = batch * sample;
  const uint64_t seed = s->seed, step = s->step;
  for (int64_t k = global_index(); k < n_all; k += grid_stride()) {
    const int64_t n = k / sample, r = k % sample;
    const int64_t c = r / plane, p = r % plane;
    const AugmentDraw d = augment_draw(spec, seed, step, n);
    out[k] = augment_pixel(spec, d, in + n * sample + c * plane, c, p / spec.width, p % spec.width);
  }
}

}  // namespace

void launch_augment(const AugmentSpec& spec, const float* in, float* out, int64_t batch, const StepScalars* s,
                    cudaStream_t stream) {
  const int64_t n = batch * spec.channels * spec.height * spec.width;
  if (n <= 0) return;
  augment_kernel<<<grid_for(n), kThreads, 0, stream>>>(spec, in, out, batch, s);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
