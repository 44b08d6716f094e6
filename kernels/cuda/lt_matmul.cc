// cuBLASLt product planning (kernels/cuda/lt_matmul.h).
#include "kernels/cuda/lt_matmul.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "kernels/cuda/algo_disk_cache.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/graph_timer.h"
#include "lib/core/elapsed.h"

namespace trainer::cuda {
namespace {

cudaDataType_t lt_type(DType t) {
  return t == DType::bf16 ? CUDA_R_16BF : t == DType::f16 ? CUDA_R_16F : CUDA_R_32F;
}

AlgoCache& lt_algo_cache() {
  static AlgoCache c(AlgoCache::default_path("cublaslt-algorithms.tsv"));
  return c;
}

// Choices measured in this process, by key (the disk cache's).
std::mutex g_tuned_mutex;
std::map<std::string, size_t>& tuned() {
  static std::map<std::string, size_t> m;
  return m;
}

}  // namespace

LtMatmul::LtMatmul(CudaBackend& be, MathMode math, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                   int k, DType ab, DType d, const LtEpilogue& epilogue, int ldb, int ldd)
    : be_(&be) {
  try {
    const cublasComputeType_t compute =
        math == MathMode::tf32 && ab == DType::f32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc_, compute, CUDA_R_32F));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    const cublasLtEpilogue_t kind = epilogue.kind;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE, &kind, sizeof kind));
    if (epilogue.vector) {
      const cudaDataType_t vt = lt_type(epilogue.vector_type);
      const void* v = epilogue.vector;
      CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &vt, sizeof vt));
      CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &v, sizeof v));
    }
    if (epilogue.aux) {
      const void* aux = epilogue.aux;
      const int64_t ld = epilogue.aux_ld;
      CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
      CUBLAS_CHECK(
          cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
    }
    // Stored shapes: A is (m, k) or, transposed, (k, m); B is (k, n) or (n, k).
    const bool a_t = ta == CUBLAS_OP_T, b_t = tb == CUBLAS_OP_T;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la_, lt_type(ab), a_t ? k : m, a_t ? m : k, a_t ? k : m));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb_, lt_type(ab), b_t ? n : k, b_t ? k : n,
                                            ldb > 0 ? ldb : (b_t ? n : k)));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ld_, lt_type(d), m, n, ldd > 0 ? ldd : m));
    cublasLtMatmulPreference_t pref = nullptr;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = be.cublas_workspace_bytes();
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
    int found = 0;
    const auto t_heuristic = std::chrono::steady_clock::now();
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(be.cublas_lt(), desc_, la_, lb_, ld_, ld_, pref,
                                                             kCandidates, results, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st == CUBLAS_STATUS_SUCCESS)
      for (int i = 0; i < found; ++i)
        if (results[i].state == CUBLAS_STATUS_SUCCESS) candidates_.push_back(results[i].algo);
    ok_ = !candidates_.empty();
    if (ok_) algo_ = candidates_[0];
    key_ = fmt::format(
        "{}{} m {} n {} k {} ab {} d {} ldb {} ldd {} epilogue {} vector {} aux_ld {} compute {} ws {}",
        a_t ? 'T' : 'N', b_t ? 'T' : 'N', m, n, k, dtype_name(ab), dtype_name(d), ldb, ldd, int(kind),
        epilogue.vector ? dtype_name(epilogue.vector_type) : "none", epilogue.aux_ld, int(compute), ws);
    what_ = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + " epilogue " +
            std::to_string(int(kind)) +
            (epilogue.vector ? std::string(" vector ") + dtype_name(epilogue.vector_type) : "");
    spdlog::debug(
        "cuBLASLt {}: {} ({:.1f} ms)", what_,
        ok_ ? std::to_string(candidates_.size()) + " candidate(s)" : std::string("no algorithm, unfused"),
        ms_since(t_heuristic));
  } catch (...) {
    release();
    throw;
  }
}

LtMatmul::~LtMatmul() { release(); }

LtMatmul& LtMatmul::operator=(LtMatmul&& o) noexcept {
  if (this == &o) return *this;
  release();
  be_ = o.be_;
  desc_ = std::exchange(o.desc_, nullptr);
  la_ = std::exchange(o.la_, nullptr);
  lb_ = std::exchange(o.lb_, nullptr);
  ld_ = std::exchange(o.ld_, nullptr);
  algo_ = o.algo_;
  candidates_ = std::move(o.candidates_);
  what_ = std::move(o.what_);
  key_ = std::move(o.key_);
  ok_ = std::exchange(o.ok_, false);
  return *this;
}

void LtMatmul::release() noexcept {
  if (ld_) cublasLtMatrixLayoutDestroy(ld_);
  if (lb_) cublasLtMatrixLayoutDestroy(lb_);
  if (la_) cublasLtMatrixLayoutDestroy(la_);
  if (desc_) cublasLtMatmulDescDestroy(desc_);
  ld_ = lb_ = la_ = nullptr;
  desc_ = nullptr;
  ok_ = false;
}

// cuBLASLt's heuristic ranks its candidates without running them, and its first choice for a small
// product often splits K, which adds a reduction kernel after the product (splitKreduce_kernel):
// mnist_cnn's dense layers ran 4 or 5 of them a step beside products of a few microseconds,
// while reuters_conv1d's 2336-long product needs the split. So each candidate runs as the step
// would run it (fastest_candidate, graph_timer.h) and the fastest is kept, as cuDNN's algorithms are
// measured.
void LtMatmul::tune(const void* a, const void* b, void* d) {
  if (candidates_.size() < 2) return;
  // The heuristic ranks the same candidates in the same order for the same key: the index names
  // the choice.
  const std::string key = gpu_identity(be_->device()) + " cublasLt " + std::to_string(cublasLtGetVersion()) +
                          " " + key_ + " candidates " + std::to_string(candidates_.size());
  {
    std::lock_guard<std::mutex> lock(g_tuned_mutex);
    if (auto it = tuned().find(key); it != tuned().end()) {
      algo_ = candidates_[it->second];
      return;
    }
  }
  std::string text;
  size_t index = candidates_.size();
  if (lt_algo_cache().get(key, &text)) {
    try {
      size_t used = 0;
      const unsigned long v = std::stoul(text, &used);
      if (used == text.size() && v < candidates_.size()) index = size_t(v);
    } catch (const std::exception&) {  // measured again
    }
  }
  if (index == candidates_.size()) {
    const Fastest f = fastest_candidate(be_->stream(), candidates_.size(), [&](size_t i) {
      algo_ = candidates_[i];
      run(a, b, d);
    });
    index = f.index;
    spdlog::debug("cuBLASLt {}: candidate {} of {} measured fastest, {:.2f} us", what_, f.index + 1,
                  candidates_.size(), 1000.f * f.ms);
    lt_algo_cache().put(key, std::to_string(index));
  }
  algo_ = candidates_[index];
  std::lock_guard<std::mutex> lock(g_tuned_mutex);
  tuned()[key] = index;
}

void LtMatmul::run(const void* a, const void* b, void* d, float beta) const {
  static constexpr float kOne = 1.f;
  CUBLAS_CHECK(cublasLtMatmul(be_->cublas_lt(), desc_, &kOne, a, la_, b, lb_, &beta, d, ld_, d, ld_, &algo_,
                              be_->cublas_workspace(), be_->cublas_workspace_bytes(), be_->stream()));
}

LtMatmul plan_first(CudaBackend& be, MathMode math, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                    int k, DType ab, DType d, const std::vector<LtEpilogue>& tries, size_t* which, int ldb,
                    int ldd) {
  for (size_t t = 0; t < tries.size(); ++t) {
    LtMatmul p(be, math, ta, tb, m, n, k, ab, d, tries[t], ldb, ldd);
    if (p.ok()) {
      *which = t;
      return p;
    }
  }
  *which = tries.size();
  return LtMatmul(be, math, ta, tb, m, n, k, ab, d, LtEpilogue{}, ldb, ldd);
}

std::vector<LtEpilogue> bias_tries(cublasLtEpilogue_t kind, const float* bias, const void* bias_low, DType t,
                                   void* aux, int64_t aux_ld) {
  std::vector<LtEpilogue> tries;
  if (!bias) return tries;
  tries.push_back(LtEpilogue{kind, bias, DType::f32, aux, aux_ld});
  if (bias_low && t != DType::f32) tries.push_back(LtEpilogue{kind, bias_low, t, aux, aux_ld});
  return tries;
}

}  // namespace trainer::cuda
