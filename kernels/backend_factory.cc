#include "lib/backend/backend_registry.h"

#include <spdlog/spdlog.h>

#include <regex>

#include "kernels/cpu/cpu_backend.h"
#include "lib/core/error.h"

#ifdef TRAINER_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#endif

namespace trainer {

bool cuda_built() {
#ifdef TRAINER_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

std::vector<GpuInfo> list_gpus(std::string* why_none) {
#ifdef TRAINER_HAVE_CUDA
  return cuda_list_gpus(why_none);
#else
  if (why_none) *why_none = "this build has no CUDA backend (built without nvcc/cuDNN)";
  return {};
#endif
}

std::string cuda_versions() {
#ifdef TRAINER_HAVE_CUDA
  return cuda_version_string();
#else
  return "";
#endif
}

namespace {

std::unique_ptr<Backend> make_cpu_backend(const DeviceRequest& req) {
  int threads = req.threads;
  if (threads <= 0) {
    std::string busy;
    threads = CpuBackend::default_threads(&busy);
    if (!busy.empty()) spdlog::info("{}", busy);
  }
  return std::make_unique<CpuBackend>(req.mem_limit_bytes, threads);
}

}  // namespace

std::unique_ptr<Backend> create_backend(const DeviceRequest& req, std::string* note) {
  std::string dev = req.device;
  if (dev == "cpu") return make_cpu_backend(req);
  std::string why;
  std::vector<GpuInfo> gpus = list_gpus(&why);
  if (dev == "auto") {
    // The first GPU this build can run on; else the CPU, saying why in one line.
    for (const auto& g : gpus)
      if (g.problem.empty()) {
        dev = "gpu:" + std::to_string(g.index);
        break;
      }
    if (dev == "auto") {
      if (!gpus.empty()) why = gpus.front().problem;
      if (note) *note = "device auto: no usable GPU (" + why + "); running on the CPU";
      return make_cpu_backend(req);
    }
  }
  std::smatch m;
  static const std::regex re("gpu(?::([0-9]+))?");
  if (!std::regex_match(dev, m, re))
    throw UsageError("unknown device '" + req.device + "'; allowed: cpu, auto, gpu, gpu:N");
  const int index = m[1].matched ? std::stoi(m[1].str()) : 0;
  if (gpus.empty()) throw RuntimeError("device " + req.device + ": no usable GPU: " + why);
  if (index >= int(gpus.size())) {
    std::string list;
    for (const auto& g : gpus) list += "\n  gpu:" + std::to_string(g.index) + "  " + g.name;
    throw RuntimeError("device " + req.device + " does not exist; GPUs present:" + list);
  }
  if (!gpus[index].problem.empty()) throw RuntimeError(gpus[index].problem);
#ifdef TRAINER_HAVE_CUDA
  return create_cuda_backend(index, req);
#else
  throw RuntimeError("device " + req.device + ": this build has no CUDA backend");
#endif
}

}  // namespace trainer
