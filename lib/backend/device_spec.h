// The one parser of device strings: "cpu", "auto" (the first usable GPU, else the CPU), "gpu"
// (= gpu:0) or "gpu:N" (N indexes the GPUs this process can see). The config's `device:` key,
// the --device flag and BackendRegistry::create() all go through it.
#pragma once

#include <optional>
#include <string>

namespace trainer {

struct DeviceSpec {
  enum class Kind { cpu, gpu, automatic };
  Kind kind = Kind::cpu;
  int index = 0;  // Kind::gpu only

  // The canonical string: "cpu", "auto" or "gpu:N".
  std::string str() const;
};

// What parse_device() accepts, for messages.
inline constexpr const char* kDeviceForms = "cpu, auto, gpu, gpu:N";
constexpr int kMaxGpuIndex = 999;

// nullopt for anything but the forms above (N: 0 to kMaxGpuIndex, decimal digits only).
std::optional<DeviceSpec> parse_device(const std::string& s);

}  // namespace trainer
