// Dropout with counter-based masks (lib/core/counter_rng.h): element i of the batch tensor draws
// u(seed, stream, i / channel_size); it survives when u >= rate.
//   x, y, mask: (n) with n = B * C * channel_size
#include "kernels/cpu/cpu_ops.h"
#include "lib/core/counter_rng.h"

namespace trainer::cpu {

void dropout_forward(const float* x, float* y, float* mask, int64_t n, int64_t channel_size, float rate,
                     uint64_t seed, uint64_t stream) {
  const float keep_scale = 1.f / (1.f - rate);
  for (int64_t i = 0; i < n; ++i) {
    uint64_t unit = uint64_t(i / channel_size);
    float m = counter_uniform(seed, stream, unit) >= rate ? keep_scale : 0.f;
    mask[i] = m;
    y[i] = x[i] * m;
  }
}

void dropout_backward(const float* dy, const float* mask, float* dx, int64_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) dx[i] = dy[i] * mask[i];
}

}  // namespace trainer::cpu
