// Dropout with counter-based masks, the formula shared with the CUDA kernel
// (lib/core/dropout_formula.h).  x, y, mask: (n) with n = B * C * channel_size
#include "kernels/cpu/cpu_ops.h"
#include "lib/core/dropout_formula.h"

namespace trainer::cpu {

void dropout_forward(const float* x, float* y, float* mask, int64_t n, int64_t channel_size, float rate,
                     uint64_t seed, uint64_t stream) {
  // One draw per unit (an element, or a whole channel for dropout2d), units in parallel: the
  // mask depends only on (seed, stream, unit), so it is the same for every thread count.
  const float keep_scale = dropout_keep_scale(rate);
  const int64_t units = n / channel_size;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t u = 0; u < units; ++u) {
    const float m = dropout_mask(seed, stream, uint64_t(u), rate, keep_scale);
    const int64_t first = u * channel_size;
    for (int64_t i = first; i < first + channel_size; ++i) {
      mask[i] = m;
      y[i] = mul_rn(x[i], m);
    }
  }
}

void dropout_backward(const float* dy, const float* mask, float* dx, int64_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) dx[i] = mul_rn(dy[i], mask[i]);
}

}  // namespace trainer::cpu
