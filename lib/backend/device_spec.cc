#include "lib/backend/device_spec.h"

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
  return "gpu:" + std::to_string(index);
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
  const std::string digits = s.substr(4);
  if (s[3] != ':' || digits.empty() || digits.size() > 3 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  d.index = std::stoi(digits);
  return d;
}

}  // namespace trainer
