#include "lib/train/bench_devices.h"

namespace trainer {

BenchDevices bench_devices() {
  BenchDevices d;
  d.devices.push_back("cpu");
  std::string why;
  const std::vector<GpuInfo> gpus = BackendRegistry::global().list_gpus(&why);
  for (const GpuInfo& g : gpus) {
    if (g.problem.empty()) {
      d.devices.push_back("gpu:" + std::to_string(g.index));
    } else {
      d.gpu_note += (d.gpu_note.empty() ? "" : "; ") + g.problem;
    }
  }
  if (gpus.empty()) d.gpu_note = why.empty() ? "no GPU found" : why;
  return d;
}

DeviceRequest on_device(const DeviceRequest& base, const std::string& device) {
  DeviceRequest r = base;
  r.device = device;
  return r;
}

}  // namespace trainer
