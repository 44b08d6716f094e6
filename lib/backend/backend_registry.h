// The backend registry: backend name -> factory, and which backend and device a device string
// names: "cpu", "auto" (the first usable GPU, else the CPU, as TensorFlow does), "gpu" (= gpu:0)
// or "gpu:N" (N indexes the GPUs this process can see, so CUDA_VISIBLE_DEVICES is respected).
//
// lib/ names no concrete backend. One explicit call, register_backends() in kernels/, fills the
// registry with every backend of the build and their layer kernels; cmd/main.cc and the test
// mains make it before anything creates a backend.
#pragma once

#include <functional>
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

// How one backend is made. The CPU backend is registered as "cpu"; a GPU backend ("cuda") also
// lists its devices and serves the device strings "gpu", "gpu:N" and "auto".
struct BackendEntry {
  std::string name;  // registry key, and Backend::name() of what make() returns
  // gpu_index: the GPU to open (GPU backends; 0 for the CPU).
  std::function<std::unique_ptr<Backend>(const DeviceRequest& req, int gpu_index)> make;
  // GPU backends only (null for the CPU): the GPUs this process can see. Never throws: without a
  // driver or GPU it returns an empty list and says why.
  std::function<std::vector<GpuInfo>(std::string* why_none)> list_gpus;
  // GPU backends only: "driver 13.0, runtime 13.0, cuDNN 9.19.0, cuBLAS 13.1.0".
  std::function<std::string()> versions;
  // GPU backends only: how many GPUs this process sees, without opening any (0 on any error).
  std::function<int()> gpu_count;
  // GPU backends only: the device-collective library ("NCCL 2.28.9") that several GPUs need; null
  // or "" without one.
  std::function<std::string()> collective_library;
};

class BackendRegistry {
 public:
  // The process-wide registry; empty until register_backends() (kernels/register_backends.h).
  static BackendRegistry& global();

  // Throws InternalError for a name registered twice or a second GPU backend.
  void add(BackendEntry entry);
  std::vector<std::string> names() const;

  // A backend for req.device. Throws UsageError for a malformed device string, RuntimeError for
  // a GPU that does not exist (listing the GPUs present) or when no GPU is usable. `note`
  // receives a line to log when "auto" falls back to the CPU.
  std::unique_ptr<Backend> create(const DeviceRequest& req, std::string* note) const;

  // The GPU backend's GPUs; empty, saying why, without one (a CPU-only build) or without a GPU.
  std::vector<GpuInfo> list_gpus(std::string* why_none) const;
  // The GPU backend's library versions; "" without one.
  std::string gpu_versions() const;
  // The GPUs this process sees, counted without opening them; 0 without a GPU backend or driver.
  int gpu_count() const;
  // The GPU backend's collective library ("NCCL 2.28.9"); "" without one (or without a GPU backend).
  std::string gpu_collective_library() const;

 private:
  const BackendEntry& cpu() const;
  const BackendEntry* gpu() const;
  std::vector<BackendEntry> entries_;
};

}  // namespace trainer
