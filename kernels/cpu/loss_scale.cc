// Loss scaling on the CPU (lib/backend/step_kernels.h, LossScaleState): the reference for
// kernels/cuda/loss_scale.cu.
//   scale_loss_gradient: dout (n) *= scale
//   unscale_gradients:   g (n) *= 1 / scale; ORs kGradientOverflow into s.nonfinite when any
//                        product is NaN or infinite
//   update_loss_scale:   lib/backend/loss_scale_formula.h
#include "kernels/cpu/cpu_ops.h"
#include "lib/backend/loss_scale_formula.h"

namespace trainer::cpu {

void scale_loss_gradient(float* dout, int64_t n, const LossScaleState& st) {
  const float k = st.scale;
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) dout[i] *= k;
}

void unscale_gradients(float* g, int64_t n, const LossScaleState& st, StepScalars& s) {
  const float k = st.inv_scale;
  int bad = 0;
#pragma omp parallel for simd reduction(| : bad) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    g[i] *= k;
    bad |= int(nonfinite_bits(g[i]));
  }
  if (bad) s.nonfinite |= kGradientOverflow;
}

void update_loss_scale(const LossScaleHyper& h, LossScaleState& st, const StepScalars& s) {
  loss_scale_update(h, st, (s.nonfinite & kGradientOverflow) != 0);
}

}  // namespace trainer::cpu
