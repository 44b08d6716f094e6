// The devices that `trainer bench` compares when it has no config (the matmul and the sweeps):
// the CPU and every GPU this build can run on.
#pragma once

#include <string>
#include <vector>

#include "lib/backend/backend_registry.h"

namespace trainer {

struct BenchDevices {
  std::vector<std::string> devices;  // "cpu", then "gpu:0", "gpu:1", ...
  // Why there is no GPU column, or which GPUs were left out and why; "" when every GPU is in.
  std::string gpu_note;
  bool has_gpu() const { return devices.size() > 1; }
};

BenchDevices bench_devices();

// `base` with its device set to `device` ("cpu", "gpu:N").
DeviceRequest on_device(const DeviceRequest& base, const std::string& device);

}  // namespace trainer
