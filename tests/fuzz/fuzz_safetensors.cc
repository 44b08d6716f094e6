// read_safetensors and read_safetensors_metadata on the input as a file.
#include "lib/checkpoint/safetensors.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainer;
  static fuzz::ScratchFile file("weights.safetensors");
  const std::string& path = file.write(std::vector<uint8_t>(data, data + size));
  fuzz::expect_typed_errors([&] { read_safetensors_metadata(path); });
  fuzz::expect_typed_errors([&] { read_safetensors(path); });
  return 0;
}
