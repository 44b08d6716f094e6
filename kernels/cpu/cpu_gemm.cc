// The matrix product and column sums the CPU's hand-written layers share (kernels/cpu/cpu_ops.h).
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <string>
#include <type_traits>

#include "kernels/cpu/cpu_ops.h"
#include "lib/core/error.h"

namespace trainer::cpu {

void gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) != dnnl_success)
    throw InternalError("oneDNN sgemm failed (" + std::to_string(m) + " x " + std::to_string(n) + " x " +
                        std::to_string(k) + ")");
}

// Blocks of kBlock columns, each summed over the rows in order (so the thread count changes
// nothing). A whole block's inner loop has a constant trip count, which GCC vectorizes; with the
// block's width in a variable it added one value at a time (5% of a one-thread reuters_lstm step).
void column_sums(const float* m, int64_t rows, int64_t cols, float* out) {
  constexpr int64_t kBlock = 32;
  const auto block = [&](int64_t j0, auto width) {
    double s[kBlock] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = m + r * cols + j0;
      for (int64_t j = 0; j < int64_t(width); ++j) s[j] += row[j];
    }
    for (int64_t j = 0; j < int64_t(width); ++j) out[j0 + j] = float(s[j]);
  };
#pragma omp parallel for schedule(static)
  for (int64_t j0 = 0; j0 < cols; j0 += kBlock) {
    if (j0 + kBlock <= cols)
      block(j0, std::integral_constant<int64_t, kBlock>{});
    else
      block(j0, cols - j0);
  }
}

}  // namespace trainer::cpu
