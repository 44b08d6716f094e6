// Two data-parallel replicas for GPU tests: one thread and GPU each (its backend made on its
// thread, whose current device it then is), joined in one NCCL collective. Needs 2 GPUs (callers
// check have_two_gpus() first).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "lib/backend/device_collective.h"
#include "lib/dist/thread_world.h"
#include "lib/train/data_parallel.h"

namespace trainer::gpu_test {

// Runs `each` on replica r's thread (r = 0, 1). Returns each replica's error (empty: none); a
// failing replica stops the other.
inline std::vector<std::string> on_two_replicas(
    const std::function<void(CudaBackend&, DeviceCollective&, Communicator&, int)>& each) {
  ThreadHub hub(2, "replica", "test threads on gpu:0,1");
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        DeviceRequest req;
        req.device = "gpu:" + std::to_string(r);
        req.deterministic = true;
        CudaBackend be(r, req);
        ThreadRank comm(hub, r);
        std::unique_ptr<DeviceCollective> dc = join_device_collective(comm, be);
        each(be, *dc, comm, r);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
        hub.fail(r, e.what());
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace trainer::gpu_test
