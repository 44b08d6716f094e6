// Adam (L2 decay), AdamW (decoupled decay) and Nadam (Keras' momentum schedule), with the formulas
// the CPU uses (lib/core/optimizer_formulas.h: explicitly rounded operations and IEEE sqrt and
// division, so the bits match the CPU's). Per-step scalars come from device memory.
#include "kernels/cuda/adam_step.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/nonfinite_guard.cuh"
#include "lib/core/host_device.h"
#include "lib/core/optimizer_formulas.h"

namespace trainer::cuda {
namespace {

__global__ void adam_kernel(AdamHyper h, float* w, const float* g, float* m, float* v, int64_t n,
                            StepScalars* s) {
  const bool skip = (s->nonfinite & kNonfiniteSkipsUpdate) != 0;  // non-finite loss or gradient: no update
  const AdamCoeffs c = adam_coeffs(h.beta1, h.beta2, h.eps, h.weight_decay, h.variant == AdamVariant::adamw,
                                   s->lr, s->bias_correction1, s->bias_correction2);
  bool bad = false;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    if (!skip) adam_update(c, w[i], g[i], m[i], v[i]);
    bad |= nonfinite_bits(w[i]);
  }
  flag_nonfinite_weights(bad, s);
}

__global__ void nadam_kernel(AdamHyper h, float* w, const float* g, float* m, float* v, int64_t n,
                             StepScalars* s) {
  const bool skip = (s->nonfinite & kNonfiniteSkipsUpdate) != 0;  // non-finite loss or gradient: no update
  const NadamCoeffs c = nadam_coeffs(h.beta1, h.beta2, h.eps, h.weight_decay, s->lr, s->bias_correction2,
                                     s->momentum_product, s->mu_t, s->mu_next);
  bool bad = false;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    if (!skip) nadam_update(c, w[i], g[i], m[i], v[i]);
    bad |= nonfinite_bits(w[i]);
  }
  flag_nonfinite_weights(bad, s);
}

}  // namespace

void launch_adam_step(const AdamHyper& h, float* w, const float* g, float* m, float* v, int64_t n,
                      StepScalars* s, cudaStream_t stream) {
  if (n <= 0) return;
  if (h.variant == AdamVariant::nadam)
    nadam_kernel<<<grid_for(n), kThreads, 0, stream>>>(h, w, g, m, v, n, s);
  else
    adam_kernel<<<grid_for(n), kThreads, 0, stream>>>(h, w, g, m, v, n, s);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
