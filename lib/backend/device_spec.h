// The one parser of device strings: "cpu", "auto" (the first usable GPU, else the CPU), "gpu"
// (= gpu:0), "gpu:N" (N indexes the GPUs this process can see), and for `trainer fit` several GPUs,
// one replica each: "gpu:N,M,..." or "gpu:all" (every GPU this process sees). The config's
// `device:` key, the --device flag and BackendRegistry::create() all go through it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace trainer {

struct DeviceSpec {
  enum class Kind { cpu, gpu, automatic };
  Kind kind = Kind::cpu;
  int index = 0;  // Kind::gpu with one GPU
  // Kind::gpu with several: the listed GPUs, in order (repeats are kept for check_gpu_list to
  // name), or every GPU. Both empty/false: the one GPU `index`.
  std::vector<int> gpus;
  bool all_gpus = false;

  bool several() const { return all_gpus || gpus.size() > 1; }
  // The canonical string: "cpu", "auto", "gpu:N", "gpu:N,M" or "gpu:all".
  std::string str() const;
};

// What parse_device() accepts, for messages (the lists of several GPUs are fit's, named where fit
// refuses a device).
inline constexpr const char* kDeviceForms = "cpu, auto, gpu, gpu:N";
inline constexpr const char* kSeveralGpuForms = "gpu:N,M,... or gpu:all";
constexpr int kMaxGpuIndex = 999;
// The same forms as a regular expression (ECMAScript and JSON Schema's): the config schema's
// device strings. tests/test_config_docs.cc checks it against parse_device().
inline constexpr const char* kDevicePattern = "^(cpu|auto|gpu(:(all|[0-9]{1,3}(,[0-9]{1,3})*))?)$";

// nullopt for anything but the forms above (N: 0 to kMaxGpuIndex, decimal digits only).
std::optional<DeviceSpec> parse_device(const std::string& s);

// The GPUs of a spec of several, checked against the `present` GPUs this process sees: gpu:all is
// every one of them. Throws UsageError naming what was given and what is allowed for a repeated
// GPU or one that is not present.
std::vector<int> check_gpu_list(const DeviceSpec& d, int present);

}  // namespace trainer
