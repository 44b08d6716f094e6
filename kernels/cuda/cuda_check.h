// Error checks for every CUDA runtime, cuDNN and cuBLAS call, and for kernel launches.
//
// A failed call throws trainer::RuntimeError naming the call as written, file:line, the current
// device ("gpu:N") and the library's error string, e.g.
//   "CUDA error: cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, stream_) failed at
//    kernels/cuda/cuda_backend.cc:120 on gpu:0: an illegal memory access was encountered
//    (cudaErrorIllegalAddress)"
// Launches: CUDA_CHECK_LAUNCH() after each <<<>>> reads cudaGetLastError() (no host sync), so
// launch-configuration errors surface at the launch that caused them.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

#include "lib/core/error.h"

namespace trainer::cuda {

inline std::string current_device_name() {
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return "gpu:?";
  }
  return "gpu:" + std::to_string(dev);
}

[[noreturn]] inline void throw_call_error(const char* lib, const char* call, const char* file, int line,
                                          const std::string& err) {
  throw RuntimeError(std::string(lib) + " error: " + call + " failed at " + file + ":" +
                     std::to_string(line) + " on " + current_device_name() + ": " + err);
}

inline std::string cuda_error_text(cudaError_t e) {
  return std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ")";
}

}  // namespace trainer::cuda

#define CUDA_CHECK(call)                                                               \
  do {                                                                                 \
    const cudaError_t trainer_e_ = (call);                                             \
    if (trainer_e_ != cudaSuccess) {                                                   \
      (void)cudaGetLastError(); /* clear a non-sticky error */                         \
      ::trainer::cuda::throw_call_error("CUDA", #call, __FILE__, __LINE__,             \
                                        ::trainer::cuda::cuda_error_text(trainer_e_)); \
    }                                                                                  \
  } while (0)

#define CUDNN_CHECK(call)                                                   \
  do {                                                                      \
    const cudnnStatus_t trainer_s_ = (call);                                \
    if (trainer_s_ != CUDNN_STATUS_SUCCESS)                                 \
      ::trainer::cuda::throw_call_error("cuDNN", #call, __FILE__, __LINE__, \
                                        cudnnGetErrorString(trainer_s_));   \
  } while (0)

#define CUBLAS_CHECK(call)                                                   \
  do {                                                                       \
    const cublasStatus_t trainer_s_ = (call);                                \
    if (trainer_s_ != CUBLAS_STATUS_SUCCESS)                                 \
      ::trainer::cuda::throw_call_error("cuBLAS", #call, __FILE__, __LINE__, \
                                        cublasGetStatusString(trainer_s_));  \
  } while (0)

// After every kernel launch: reports a bad launch configuration without synchronizing.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
