// Loss scaling: two grid-stride multiplies by a factor read from device memory (the unscale also
// ORs the overflow bit, tested on the exponent bits as the non-finite guard does), and a one-thread
// update of the scale at the end of the step.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/loss_scale.cuh"
#include "lib/backend/loss_scale_formula.h"

namespace trainer::cuda {
namespace {

__global__ void scale_kernel(float* x, int64_t n, const float* factor) {
  const float k = *factor;
  for (int64_t i = global_index(); i < n; i += grid_stride()) x[i] = __fmul_rn(x[i], k);
}

__global__ void unscale_kernel(float* g, int64_t n, const float* inv_scale, StepScalars* s) {
  const float k = *inv_scale;
  int bad = 0;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float v = __fmul_rn(g[i], k);
    g[i] = v;
    bad |= int(nonfinite_bits(v));
  }
  if (__syncthreads_or(bad) && threadIdx.x == 0) atomicOr(&s->nonfinite, kGradientOverflow);
}

__global__ void update_kernel(LossScaleHyper h, LossScaleState* st, const StepScalars* s) {
  loss_scale_update(h, *st, (s->nonfinite & kGradientOverflow) != 0);
}

}  // namespace

void launch_scale_loss_gradient(float* dout, int64_t n, const LossScaleState* st, cudaStream_t stream) {
  if (n <= 0) return;
  scale_kernel<<<grid_for(n), kThreads, 0, stream>>>(dout, n, &st->scale);
  CUDA_CHECK_LAUNCH();
}

void launch_unscale_gradients(float* g, int64_t n, const LossScaleState* st, StepScalars* s,
                              cudaStream_t stream) {
  if (n <= 0) return;
  unscale_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, n, &st->inv_scale, s);
  CUDA_CHECK_LAUNCH();
}

void launch_update_loss_scale(const LossScaleHyper& h, LossScaleState* st, const StepScalars* s,
                              cudaStream_t stream) {
  update_kernel<<<1, 1, 0, stream>>>(h, st, s);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
