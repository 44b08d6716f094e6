// read_npy and dataset_from_npy on a samples file and a labels file (stored or gzip).
// Input: [num_classes - 1][labels length, u16 LE][labels .npy][samples .npy].
#include "datasets/npy_reader.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainer;
  static fuzz::ScratchFile x_file("x.npy"), y_file("y.npy");
  fuzz::InputBytes in(data, size);
  const int num_classes = in.u8() + 1;
  const uint16_t y_len = in.u16();
  const std::string& y = y_file.write(in.take(y_len));
  const std::string& x = x_file.write(in.rest());
  fuzz::expect_typed_errors([&] { read_npy(x); });
  fuzz::expect_typed_errors([&] { dataset_from_npy(x, y, num_classes); });
  return 0;
}
