// Dropout with counter-based masks (lib/core/counter_rng.h): element i of the batch tensor draws
// u(seed, stream, i / channel_size); it survives when u >= rate.
//   x, y, mask: (n) with n = B * C * channel_size
#include "kernels/cpu/cpu_ops.h"
#include "lib/core/counter_rng.h"

namespace trainer::cpu {

void dropout_forward(const float* x, float* y, float* mask, int64_t n, int64_t channel_size, float rate,
                     uint64_t seed, uint64_t stream) {
  // One draw per unit (an element, or a whole channel for dropout2d), units in parallel: the
  // mask depends only on (seed, stream, unit), so it is the same for every thread count.
  const float keep_scale = 1.f / (1.f - rate);
  const int64_t units = n / channel_size;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int64_t u = 0; u < units; ++u) {
    const float m = counter_uniform(seed, stream, uint64_t(u)) >= rate ? keep_scale : 0.f;
    const int64_t first = u * channel_size;
    for (int64_t i = first; i < first + channel_size; ++i) {
      mask[i] = m;
      y[i] = x[i] * m;
    }
  }
}

void dropout_backward(const float* dy, const float* mask, float* dx, int64_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * mask[i];
}

}  // namespace trainer::cpu
