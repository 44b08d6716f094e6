// Adam (L2 decay), AdamW (decoupled decay) and Nadam (Keras' momentum schedule), as the CPU:
//   Adam:  g' = g + wd*w; m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2
//          w -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)
//   AdamW: w *= 1 - lr*wd first, then Adam without the L2 term
//   Nadam: m_hat = mu_{t+1} m / (1 - prod mu up to t+1) + (1 - mu_t) g' / (1 - prod mu up to t)
//          w -= lr * m_hat / (sqrt(v / bc2) + eps)
// Per-step scalars come from device memory. Explicitly rounded intrinsics (no FMA contraction)
// and IEEE sqrt/division reproduce the CPU's float arithmetic exactly.
#include "kernels/cuda/adam_step.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"

namespace trainer::cuda {
namespace {

__global__ void adam_kernel(AdamHyper h, float* w, const float* g, float* m, float* v, int64_t n,
                            const StepScalars* s) {
  if (s->nonfinite & kNonfiniteSkipsUpdate) return;  // non-finite loss or gradient: no update
  const float lr = s->lr, b1 = h.beta1, b2 = h.beta2, eps = h.eps, wd = h.weight_decay;
  const float one_b1 = 1.f - b1, one_b2 = 1.f - b2;
  const bool decoupled = h.variant == AdamVariant::adamw;
  const float step_size = __fdiv_rn(lr, s->bias_correction1);
  const float sqrt_bc2 = __fsqrt_rn(s->bias_correction2);
  const float decay = decoupled ? __fsub_rn(1.f, __fmul_rn(lr, wd)) : 1.f;
  const float l2 = decoupled ? 0.f : wd;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float wi = __fmul_rn(w[i], decay);
    const float gi = __fadd_rn(g[i], __fmul_rn(l2, wi));
    const float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(one_b1, gi));
    const float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(one_b2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), sqrt_bc2), eps);
    w[i] = __fsub_rn(wi, __fdiv_rn(__fmul_rn(step_size, mi), denom));
  }
}

__global__ void nadam_kernel(AdamHyper h, float* w, const float* g, float* m, float* v, int64_t n,
                             const StepScalars* s) {
  if (s->nonfinite & kNonfiniteSkipsUpdate) return;  // non-finite loss or gradient: no update
  const float lr = s->lr, b1 = h.beta1, b2 = h.beta2, eps = h.eps, wd = h.weight_decay;
  const float one_b1 = 1.f - b1, one_b2 = 1.f - b2;
  const float prod_next = __fmul_rn(s->momentum_product, s->mu_next);
  const float c_m = __fdiv_rn(s->mu_next, __fsub_rn(1.f, prod_next));
  const float c_g = __fdiv_rn(__fsub_rn(1.f, s->mu_t), __fsub_rn(1.f, s->momentum_product));
  const float bc2 = s->bias_correction2;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float wi = w[i];
    const float gi = __fadd_rn(g[i], __fmul_rn(wd, wi));
    const float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(one_b1, gi));
    const float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(one_b2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    const float m_hat = __fadd_rn(__fmul_rn(c_m, mi), __fmul_rn(c_g, gi));
    const float denom = __fadd_rn(__fsqrt_rn(__fdiv_rn(vi, bc2)), eps);
    w[i] = __fsub_rn(wi, __fdiv_rn(__fmul_rn(lr, m_hat), denom));
  }
}

}  // namespace

void launch_adam_step(const AdamHyper& h, float* w, const float* g, float* m, float* v, int64_t n,
                      const StepScalars* s, cudaStream_t stream) {
  if (n <= 0) return;
  if (h.variant == AdamVariant::nadam)
    nadam_kernel<<<grid_for(n), kThreads, 0, stream>>>(h, w, g, m, v, n, s);
  else
    adam_kernel<<<grid_for(n), kThreads, 0, stream>>>(h, w, g, m, v, n, s);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
