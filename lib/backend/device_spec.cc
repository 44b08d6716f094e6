#include "lib/backend/device_spec.h"

#include <algorithm>

#include "lib/core/error.h"

namespace trainer {

std::string DeviceSpec::str() const {
  switch (kind) {
    case Kind::cpu:
      return "cpu";
    case Kind::automatic:
      return "auto";
    case Kind::gpu:
      break;
  }
  if (all_gpus) return "gpu:all";
  if (gpus.size() > 1) {
    std::string s = "gpu:";
    for (size_t i = 0; i < gpus.size(); ++i) s += (i ? "," : "") + std::to_string(gpus[i]);
    return s;
  }
  return "gpu:" + std::to_string(index);
}

// One GPU index: 1 to 3 decimal digits.
static std::optional<int> parse_index(const std::string& digits) {
  if (digits.empty() || digits.size() > 3 || digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoi(digits);
}

std::optional<DeviceSpec> parse_device(const std::string& s) {
  DeviceSpec d;
  if (s == "cpu") return d;
  if (s == "auto") {
    d.kind = DeviceSpec::Kind::automatic;
    return d;
  }
  if (s.rfind("gpu", 0) != 0) return std::nullopt;
  d.kind = DeviceSpec::Kind::gpu;
  if (s.size() == 3) return d;
  if (s[3] != ':') return std::nullopt;
  const std::string list = s.substr(4);
  if (list == "all") {
    d.all_gpus = true;
    return d;
  }
  size_t at = 0;
  while (true) {
    const size_t comma = list.find(',', at);
    const std::optional<int> i =
        parse_index(list.substr(at, comma == std::string::npos ? comma : comma - at));
    if (!i) return std::nullopt;
    d.gpus.push_back(*i);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  d.index = d.gpus.front();
  if (d.gpus.size() == 1) d.gpus.clear();  // "gpu:1" is one GPU
  return d;
}

std::vector<int> check_gpu_list(const DeviceSpec& d, int present) {
  std::vector<int> gpus = d.gpus;
  if (d.all_gpus)
    for (int i = 0; i < present; ++i) gpus.push_back(i);
  else if (gpus.empty())
    gpus.push_back(d.index);
  const std::string allowed = present == 0 ? "this process sees no GPU"
                              : present == 1
                                  ? "this process sees one GPU, gpu:0"
                                  : "this process sees gpu:0 to gpu:" + std::to_string(present - 1);
  if (gpus.empty()) throw UsageError("--device " + d.str() + ": " + allowed);
  for (size_t i = 0; i < gpus.size(); ++i) {
    if (gpus[i] >= present)
      throw UsageError("--device " + d.str() + ": gpu:" + std::to_string(gpus[i]) + " is not present; " +
                       allowed + " (CUDA_VISIBLE_DEVICES is respected)");
    if (std::find(gpus.begin(), gpus.begin() + long(i), gpus[i]) != gpus.begin() + long(i))
      throw UsageError("--device " + d.str() + ": gpu:" + std::to_string(gpus[i]) +
                       " is listed twice; each GPU takes one replica: list each once");
  }
  return gpus;
}

}  // namespace trainer
