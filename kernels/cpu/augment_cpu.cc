// Random crop and flip of a training batch on the CPU: the shared formula
// (lib/core/augment_formula.h), one sample per OpenMP iteration.
//   in, out: (B, C, H, W)
#include "kernels/cpu/cpu_ops.h"

namespace trainer::cpu {

void augment(const AugmentSpec& spec, const float* in, float* out, int64_t batch, const StepScalars& s) {
  const int64_t plane = spec.height * spec.width, sample = spec.channels * plane;
#pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < batch; ++n) {
    const AugmentDraw d = augment_draw(spec, s.seed, s.step, n);
    for (int64_t c = 0; c < spec.channels; ++c) {
      const float* x_c = in + n * sample + c * plane;
      float* y_c = out + n * sample + c * plane;
      for (int64_t i = 0; i < spec.height; ++i)
        for (int64_t j = 0; j < spec.width; ++j)
          y_c[i * spec.width + j] = augment_pixel(spec, d, x_c, c, i, j);
    }
  }
}

}  // namespace trainer::cpu
