// The matrix product and column sums the CPU's hand-written layers share (kernels/cpu/cpu_ops.h).
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <string>

#include "kernels/cpu/cpu_ops.h"
#include "lib/core/error.h"

namespace trainer::cpu {

void gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (dnnl_sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) != dnnl_success)
    throw InternalError("oneDNN sgemm failed (" + std::to_string(m) + " x " + std::to_string(n) + " x " +
                        std::to_string(k) + ")");
}

void column_sums(const float* m, int64_t rows, int64_t cols, float* out) {
  constexpr int64_t kBlock = 16;
#pragma omp parallel for schedule(static)
  for (int64_t j0 = 0; j0 < cols; j0 += kBlock) {
    const int64_t j1 = std::min(cols, j0 + kBlock);
    double s[kBlock] = {};
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = j0; j < j1; ++j) s[j - j0] += m[r * cols + j];
    for (int64_t j = j0; j < j1; ++j) out[j] = float(s[j - j0]);
  }
}

}  // namespace trainer::cpu
