// The documents' big matmul, (M x K) by (K x N) in fp32 (10000 x 100 by 100 x 100000: 2e11
// floating-point operations, a 4 GB result), timed on one device through that backend's own GEMM
// path: the dense layer's kernel (oneDNN's inner product on the CPU, cuBLAS sgemm on the GPU).
// No new kernel: C = A B^T with B held as the dense weight (N, K), which is the same product.
// Every buffer comes from the backend's allocator, so --mem-limit caps it.
#pragma once

#include <cstdint>
#include <string>

#include "lib/backend/backend_registry.h"

namespace trainer {

struct MatmulShape {
  int64_t m = 10000, k = 100, n = 100000;
  double flops() const { return 2.0 * double(m) * double(k) * double(n); }
  std::string str() const;  // "(10000 x 100) x (100 x 100000)"
};

// "MxKxN" (e.g. "10000x100x100000"); UsageError naming --size otherwise, or when M x N exceeds
// one tensor (2^31 - 1 elements).
MatmulShape parse_matmul_shape(const std::string& text);

struct MatmulTiming {
  std::string device;       // "cpu", "gpu:0"
  std::string description;  // Backend::description()
  double seconds = 0;       // median of the timed products, each from launch to completion
  double gflops = 0;        // shape.flops() / seconds / 1e9
  // Largest |C - reference| / sum_k |A B^T| over 16 entries checked against a float64 product.
  double max_rel_error = 0;
};

// One untimed product (primitive set-up, page faults, cuBLAS heuristics), then `repeats` timed.
MatmulTiming time_matmul(const MatmulShape& shape, const DeviceRequest& device, int repeats);

}  // namespace trainer
