// The on-disk cache of measured convolution choices (lib/backend/algo_cache.h) that
// cudnn_conv.cc (cuDNN's algorithms) and conv_direct_choice.cc (our direct kernels against
// them) share, and what their keys begin with: what a choice depends on besides the shape, the
// GPU's name and compute capability, the driver and cuDNN versions.
#pragma once

#include <cuda_runtime.h>
#include <cudnn.h>

#include <map>
#include <mutex>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "lib/backend/algo_cache.h"

namespace trainer::cuda {

inline AlgoCache& conv_algo_cache() {
  static AlgoCache c(AlgoCache::default_path("cudnn-convolution-algorithms.tsv"));
  return c;
}

// cuDNN's fused graphs chosen by timing (CudnnConv::choose_fused), each as its serialized plan
// (CudnnGraph::plan_json): a runtime-compiled engine's kernel is not compiled again.
inline AlgoCache& fused_plan_cache() {
  static AlgoCache c(AlgoCache::default_path("cudnn-fused-plans.tsv"));
  return c;
}

// "NVIDIA H100 80GB HBM3 cc90 driver 13000 cudnn 91900"
inline std::string gpu_identity(int device) {
  static std::mutex m;
  static std::map<int, std::string> ids;
  std::lock_guard<std::mutex> lock(m);
  auto it = ids.find(device);
  if (it != ids.end()) return it->second;
  cudaDeviceProp p{};
  int driver = 0;
  CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  CUDA_CHECK(cudaDriverGetVersion(&driver));
  std::string id = std::string(p.name) + " cc" + std::to_string(p.major) + std::to_string(p.minor) +
                   " driver " + std::to_string(driver) + " cudnn " + std::to_string(cudnnGetVersion());
  return ids[device] = id;
}

}  // namespace trainer::cuda
