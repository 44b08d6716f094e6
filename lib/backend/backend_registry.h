// Creating a backend from a device string: "cpu", "auto" (first GPU if any, else the CPU, as
// TensorFlow does), "gpu" (= gpu:0) or "gpu:N" (N indexes the GPUs this process can see, so
// CUDA_VISIBLE_DEVICES is respected).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lib/backend/backend.h"

namespace trainer {

struct DeviceRequest {
  std::string device = "cpu";
  size_t mem_limit_bytes = 0;  // 0: no cap
  bool mem_growth = false;
  MathMode math = MathMode::strict_fp32;
  bool deterministic = false;
  int threads = 0;  // CPU backend: 0 = OMP_NUM_THREADS if set, else the cores in our affinity mask
};

struct GpuInfo {
  int index = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  size_t total_bytes = 0, free_bytes = 0;
  // Empty when this build can run on the GPU; otherwise the message that says why not and what
  // to do (its compute capability has no code in this binary).
  std::string problem;
};

// Throws RuntimeError for a GPU that does not exist (listing the GPUs present) or when no GPU is
// usable. `note` receives a line to log when "auto" falls back to the CPU.
std::unique_ptr<Backend> create_backend(const DeviceRequest& req, std::string* note);

// Whether this build has the CUDA backend, and the GPUs it can see (empty without a driver).
bool cuda_built();
std::vector<GpuInfo> list_gpus(std::string* why_none);
// "driver 13.0, runtime 13.0, cuDNN 9.19.0, cuBLAS 13.1.0" or "" without CUDA.
std::string cuda_versions();

}  // namespace trainer
