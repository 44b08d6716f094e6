// read_cifar10 on one file (stored or gzip), then on the same file twice.
#include "datasets/cifar10_reader.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainer;
  static fuzz::ScratchFile file("data_batch.bin");
  const std::string& path = file.write(std::vector<uint8_t>(data, data + size));
  fuzz::expect_typed_errors([&] { read_cifar10({path}); });
  fuzz::expect_typed_errors([&] { read_cifar10({path, path}); });
  return 0;
}
