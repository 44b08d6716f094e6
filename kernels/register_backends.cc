#include "kernels/register_backends.h"

#include <spdlog/spdlog.h>

#include <memory>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "lib/backend/backend_registry.h"
#include "lib/registry/registry.h"

#ifdef TRAINER_HAVE_CUDA
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#endif

namespace trainer {

void register_backends(BackendRegistry& backends, Registry& layers) {
  BackendEntry cpu;
  cpu.name = "cpu";
  cpu.make = [](const DeviceRequest& req, int) -> std::unique_ptr<Backend> {
    int threads = req.threads;
    if (threads <= 0) {  // no count asked for: the usable cores not busy with other work
      std::string busy;
      threads = CpuBackend::default_threads(&busy);
      if (!busy.empty()) spdlog::info("{}", busy);
    }
    return std::make_unique<CpuBackend>(req.mem_limit_bytes, threads);
  };
  backends.add(std::move(cpu));
  register_cpu_kernels(layers);
#ifdef TRAINER_HAVE_CUDA
  BackendEntry cuda;
  cuda.name = "cuda";
  cuda.make = [](const DeviceRequest& req, int gpu_index) { return create_cuda_backend(gpu_index, req); };
  cuda.list_gpus = cuda_list_gpus;
  cuda.versions = cuda_version_string;
  cuda.collective_library = cuda_collective_library;
  cuda.gpu_count = cuda_gpu_count;
  backends.add(std::move(cuda));
  register_cuda_kernels(layers);
#endif
}

}  // namespace trainer
