// cuBLAS and cuBLASLt, opened with dlopen at their first call instead of linked.
//
// Loading libcublasLt runs its static initializers: 130 ms and 211 MB of resident memory in every
// process that links it, before main (an empty program linked to it alone shows the same, Debian 12,
// CUDA 13.0). Every `trainer` invocation paid that, `--help`, `summary` and CPU-only runs included,
// and each rank of mpirun. The executable now defines the cuBLAS functions it calls (those the
// compiler sees declared in the libraries' own headers, so each signature is checked against
// them); the first call of either library's opens it (RTLD_LOCAL: the executable exports none of
// these names, so nothing else binds to them) and each function finds its symbol once. A GPU run
// opens both on the backend's warm-up thread while the CUDA context is created (preload_cublas).
// A library that cannot be opened makes its functions return CUBLAS_STATUS_NOT_INITIALIZED, and
// cublasGetStatusString says why.
#include "kernels/cuda/cublas_lazy.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

namespace trainer::cuda {
namespace {

enum Library { kLt = 0, kBlas = 1 };

struct Opened {
  void* handle = nullptr;
  std::string error;
};

Opened& opened(Library which) {
  static Opened libs[2];
  static std::once_flag once[2];
  std::call_once(once[which], [which] {
    // libcublas needs libcublasLt (its DT_NEEDED): open that first, so both come from one place.
    if (which == kBlas) (void)opened(kLt);
    const std::string name =
        std::string(which == kLt ? "libcublasLt.so." : "libcublas.so.") + std::to_string(CUBLAS_VER_MAJOR);
    libs[which].handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!libs[which].handle) {
      const char* e = dlerror();
      libs[which].error = e ? e : name + ": cannot be opened";
    }
  });
  return libs[which];
}

template <class F>
F symbol(Library which, const char* name) {
  void* h = opened(which).handle;
  return h ? reinterpret_cast<F>(dlsym(h, name)) : nullptr;
}

}  // namespace

void preload_cublas() { (void)opened(kBlas); }

std::string cublas_load_error() {
  std::string e = opened(kLt).error;
  if (e.empty()) e = opened(kBlas).error;
  return e;
}

}  // namespace trainer::cuda

// One definition a function: NAME(PARAMS) forwards ARGS to the library's own NAME.
#define TRAINER_CUBLAS_LAZY(LIB, NAME, PARAMS, ARGS)                                                  \
  extern "C" cublasStatus_t CUBLASWINAPI NAME PARAMS {                                                \
    static const auto f = trainer::cuda::symbol<cublasStatus_t(*) PARAMS>(trainer::cuda::LIB, #NAME); \
    return f ? f ARGS : CUBLAS_STATUS_NOT_INITIALIZED;                                                \
  }

TRAINER_CUBLAS_LAZY(kLt, cublasLtCreate, (cublasLtHandle_t * h), (h))
TRAINER_CUBLAS_LAZY(kLt, cublasLtDestroy, (cublasLtHandle_t h), (h))
TRAINER_CUBLAS_LAZY(kLt, cublasLtMatmul,
                    (cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void* alpha, const void* a,
                     cublasLtMatrixLayout_t la, const void* b, cublasLtMatrixLayout_t lb, const void* beta,
                     const void* c, cublasLtMatrixLayout_t lc, void* d, cublasLtMatrixLayout_t ld,
                     const cublasLtMatmulAlgo_t* algo, void* ws, size_t ws_bytes, cudaStream_t stream),
                    (h, desc, alpha, a, la, b, lb, beta, c, lc, d, ld, algo, ws, ws_bytes, stream))
TRAINER_CUBLAS_LAZY(kLt, cublasLtMatmulAlgoGetHeuristic,
                    (cublasLtHandle_t h, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la,
                     cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc, cublasLtMatrixLayout_t ld,
                     cublasLtMatmulPreference_t pref, int requested,
                     cublasLtMatmulHeuristicResult_t results[], int* returned),
                    (h, desc, la, lb, lc, ld, pref, requested, results, returned))
TRAINER_CUBLAS_LAZY(kLt, cublasLtMatmulDescCreate,
                    (cublasLtMatmulDesc_t * desc, cublasComputeType_t compute, cudaDataType_t scale),
                    (desc, compute, scale))
TRAINER_CUBLAS_LAZY(kLt, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc), (desc))
TRAINER_CUBLAS_LAZY(kLt, cublasLtMatmulDescSetAttribute,
                    (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* buf,
                     size_t bytes),
                    (desc, attr, buf, bytes))
TRAINER_CUBLAS_LAZY(kLt, cublasLtMatmulPreferenceCreate, (cublasLtMatmulPreference_t * pref), (pref))
TRAINER_CUBLAS_LAZY(kLt, cublasLtMatmulPreferenceDestroy, (cublasLtMatmulPreference_t pref), (pref))
TRAINER_CUBLAS_LAZY(kLt, cublasLtMatmulPreferenceSetAttribute,
                    (cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
                     const void* buf, size_t bytes),
                    (pref, attr, buf, bytes))
TRAINER_CUBLAS_LAZY(kLt, cublasLtMatrixLayoutCreate,
                    (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows, uint64_t cols,
                     int64_t ld),
                    (layout, type, rows, cols, ld))
TRAINER_CUBLAS_LAZY(kLt, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t layout), (layout))

TRAINER_CUBLAS_LAZY(kBlas, cublasCreate_v2, (cublasHandle_t * h), (h))
TRAINER_CUBLAS_LAZY(kBlas, cublasDestroy_v2, (cublasHandle_t h), (h))
TRAINER_CUBLAS_LAZY(kBlas, cublasSetStream_v2, (cublasHandle_t h, cudaStream_t stream), (h, stream))
TRAINER_CUBLAS_LAZY(kBlas, cublasSetPointerMode_v2, (cublasHandle_t h, cublasPointerMode_t mode), (h, mode))
TRAINER_CUBLAS_LAZY(kBlas, cublasSetMathMode, (cublasHandle_t h, cublasMath_t mode), (h, mode))
TRAINER_CUBLAS_LAZY(kBlas, cublasSetWorkspace_v2, (cublasHandle_t h, void* ws, size_t bytes), (h, ws, bytes))
TRAINER_CUBLAS_LAZY(kBlas, cublasGetProperty, (libraryPropertyType type, int* value), (type, value))
TRAINER_CUBLAS_LAZY(kBlas, cublasSgemm_v2,
                    (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                     const float* alpha, const float* a, int lda, const float* b, int ldb, const float* beta,
                     float* c, int ldc),
                    (h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
TRAINER_CUBLAS_LAZY(kBlas, cublasGemmEx,
                    (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                     const void* alpha, const void* a, cudaDataType at, int lda, const void* b,
                     cudaDataType bt, int ldb, const void* beta, void* c, cudaDataType ct, int ldc,
                     cublasComputeType_t compute, cublasGemmAlgo_t algo),
                    (h, ta, tb, m, n, k, alpha, a, at, lda, b, bt, ldb, beta, c, ct, ldc, compute, algo))
TRAINER_CUBLAS_LAZY(kBlas, cublasGemmBatchedEx,
                    (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                     const void* alpha, const void* const a[], cudaDataType at, int lda,
                     const void* const b[], cudaDataType bt, int ldb, const void* beta, void* const c[],
                     cudaDataType ct, int ldc, int batch, cublasComputeType_t compute, cublasGemmAlgo_t algo),
                    (h, ta, tb, m, n, k, alpha, a, at, lda, b, bt, ldb, beta, c, ct, ldc, batch, compute,
                     algo))
TRAINER_CUBLAS_LAZY(kBlas, cublasGemmStridedBatchedEx,
                    (cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                     const void* alpha, const void* a, cudaDataType at, int lda, long long int stride_a,
                     const void* b, cudaDataType bt, int ldb, long long int stride_b, const void* beta,
                     void* c, cudaDataType ct, int ldc, long long int stride_c, int batch,
                     cublasComputeType_t compute, cublasGemmAlgo_t algo),
                    (h, ta, tb, m, n, k, alpha, a, at, lda, stride_a, b, bt, ldb, stride_b, beta, c, ct, ldc,
                     stride_c, batch, compute, algo))

// Two that do not return a status.
extern "C" size_t CUBLASWINAPI cublasLtGetVersion(void) {
  static const auto f = trainer::cuda::symbol<size_t (*)()>(trainer::cuda::kLt, "cublasLtGetVersion");
  return f ? f() : 0;
}

extern "C" const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  static const auto f =
      trainer::cuda::symbol<const char* (*)(cublasStatus_t)>(trainer::cuda::kBlas, "cublasGetStatusString");
  if (f) return f(status);
  static const std::string why = "cuBLAS could not be opened: " + trainer::cuda::cublas_load_error();
  return why.c_str();
}
