// parse_config (lib/config): YAML text and one --set override, as `trainer fit` loads them.
// Input: [override length][override "dotted.key=value"][YAML text]; length 0: no override.
#include "lib/config/config.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainer;
  fuzz::InputBytes in(data, size);
  const uint8_t override_len = in.u8();
  const std::vector<uint8_t> set = in.take(override_len);
  const std::vector<uint8_t> yaml = in.rest();
  std::vector<std::string> overrides;
  if (override_len > 0) overrides.emplace_back(set.begin(), set.end());
  fuzz::expect_typed_errors(
      [&] { parse_config(std::string(yaml.begin(), yaml.end()), "fuzz.yaml", overrides); });
  return 0;
}
