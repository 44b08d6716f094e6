// Global-norm gradient clipping on the CPU: fixed partial sums (lib/core/clip_formula.h) in
// parallel, then their total in order, so the result is the same for any thread count.
#include <cmath>

#include "kernels/cpu/cpu_ops.h"
#include "lib/core/clip_formula.h"

namespace trainer::cpu {

// The two phases of clipping (ClipKernel::clip runs both with one group; pipeline stages gather
// every stage's partials first).
void clip_grad_sum_squares(const float* g, int64_t n, double* partials) {
#pragma omp parallel for schedule(static) if (n > 65536)
  for (int i = 0; i < kClipPartials; ++i) {
    double sq = 0;
    for (int64_t j = clip_chunk_begin(n, i, kClipPartials), e = clip_chunk_begin(n, i + 1, kClipPartials);
         j < e; ++j)
      sq += double(g[j]) * double(g[j]);
    partials[i] = sq;
  }
}

void clip_grad_by_partials(float* g, int64_t n, float max_norm, const double* partials, int groups,
                           ClipRecord* record) {
  double total = 0;
  for (int64_t i = 0; i < int64_t(groups) * kClipPartials; ++i) total += partials[i];
  const double norm = std::sqrt(total);
  const float scale = clip_factor(norm, max_norm);
  record->last_norm = float(norm);
  record->last_scale = scale;
  if (scale == 1.f) return;
  record->clipped_steps += 1;
#pragma omp parallel for simd if (n > 65536)
  for (int64_t j = 0; j < n; ++j) g[j] *= scale;
}

}  // namespace trainer::cpu
