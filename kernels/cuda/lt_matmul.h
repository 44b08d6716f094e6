// One cuBLASLt matrix product with an optional fused epilogue, planned once (descriptors,
// layouts and the heuristic's candidate algorithms; tune() measures them) when the kernel binds its tensors,
// then run as often as the step runs. Column-major, as cuBLAS:
//   D (m, n) = op(A) op(B)            epilogue DEFAULT
//   D (m, n) = op(A) op(B) + bias     epilogue BIAS: bias (m) f32, added to every column
//   D (m, n) = op(A) op(B); grad (n)  epilogue BGRADB: grad[j] = sum over k of op(B)[:, j], f32
//   D (m, n) = gelu(op(A) op(B) + bias), aux = op(A) op(B) + bias      epilogue GELU_AUX_BIAS
//     (GELU's tanh form; aux, D's dtype and shape, is what backward differentiates at)
// The bias (or its gradient) is f32 or in D's dtype (LtEpilogue::vector_type): cuBLASLt may have
// no algorithm for an f32 bias beside a 16-bit D, and then takes the 16-bit copy of the bias.
// A and B share a dtype; D has its own (f32 dW from 16-bit x and dy). Compute is f32: strict
// (no TF32) in math fp32, TF32 tensor cores in tf32, 16-bit tensor cores with f32 accumulation
// in bf16 and fp16. The product runs on the backend's stream with its cuBLAS workspace.
#pragma once

#include <cublasLt.h>

#include <string>
#include <vector>

#include "kernels/cuda/cuda_backend.h"

namespace trainer::cuda {

// What the product does after the sum (DEFAULT: nothing).
struct LtEpilogue {
  cublasLtEpilogue_t kind = CUBLASLT_EPILOGUE_DEFAULT;
  const void* vector = nullptr;    // the bias or bias gradient
  DType vector_type = DType::f32;  // its dtype: f32 or D's
  void* aux = nullptr;             // GELU_AUX*: the pre-activation (m, n) in D's dtype
  int64_t aux_ld = 0;              // and its leading dimension (a multiple of 8)
};

class LtMatmul {
 public:
  LtMatmul() = default;
  // Plans the product; ok() says whether cuBLASLt has an algorithm for it (an epilogue may not be
  // available for every dtype combination: the caller then runs the unfused product and its own
  // kernel).
  // ldb, ldd: B's and D's leading dimensions when not the packed ones (0: packed), e.g. a row
  // stride padded to 16 bytes so that the product runs on aligned tensor-core kernels.
  LtMatmul(CudaBackend& be, MathMode math, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
           DType ab, DType d, const LtEpilogue& epilogue = {}, int ldb = 0, int ldd = 0);
  ~LtMatmul();
  LtMatmul(const LtMatmul&) = delete;
  LtMatmul& operator=(const LtMatmul&) = delete;
  LtMatmul(LtMatmul&& o) noexcept { *this = std::move(o); }
  LtMatmul& operator=(LtMatmul&& o) noexcept;

  bool ok() const { return ok_; }
  // D = op(A) op(B) (+ epilogue); a, b in the A/B dtype, d in D's.
  // beta 1: D += the product (D read first), for products summed over chunks.
  void run(const void* a, const void* b, void* d, float beta = 0.f) const;
  // Runs each candidate algorithm on these tensors (plan time only: it writes d and the
  // epilogue's vector, and waits for the stream) and keeps the fastest; without tune() the
  // heuristic's first choice runs. Not for --deterministic runs: a timing must not pick the math.
  // A product measured before (the same key: shapes, dtypes, epilogue, math, GPU and library
  // versions) takes that choice without measuring: once per process, and across processes
  // through the disk cache (algo_disk_cache.h). GPT-2 small's 144 products are 8 distinct ones.
  void tune(const void* a, const void* b, void* d);

 private:
  static constexpr int kCandidates = 8;  // heuristic results asked for
  void release() noexcept;
  CudaBackend* be_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t la_ = nullptr, lb_ = nullptr, ld_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
  std::vector<cublasLtMatmulAlgo_t> candidates_;  // the heuristic's, best ranked first
  std::string what_;                              // "MxNxK epilogue E", for the log
  std::string key_;                               // everything the choice depends on but the GPU
  bool ok_ = false;
};

// The first product of `tries` cuBLASLt has an algorithm for, *which its index; else
// (*which = tries.size()) the product without an epilogue (whose ok() may still be false).
LtMatmul plan_first(CudaBackend& be, MathMode math, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                    int k, DType ab, DType d, const std::vector<LtEpilogue>& tries, size_t* which,
                    int ldb = 0, int ldd = 0);

// A bias epilogue `kind` in the order plan_first tries them: the f32 bias, then its copy in the
// 16-bit dtype t (bias_low; null: none). Empty without a bias.
std::vector<LtEpilogue> bias_tries(cublasLtEpilogue_t kind, const float* bias, const void* bias_low, DType t,
                                   void* aux = nullptr, int64_t aux_ld = 0);

}  // namespace trainer::cuda
