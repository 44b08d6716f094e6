// read_idx on an images file and a labels file, stored or gzip as the corpus has them.
// Input: [num_classes - 1][limit][labels length, u16 LE][labels file][images file].
#include "datasets/idx_reader.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainer;
  static fuzz::ScratchFile images("images.idx"), labels("labels.idx");
  fuzz::InputBytes in(data, size);
  const int num_classes = in.u8() + 1;
  const int64_t limit = in.u8();
  const uint16_t labels_len = in.u16();
  const std::string& lab = labels.write(in.take(labels_len));
  const std::string& img = images.write(in.rest());
  fuzz::expect_typed_errors([&] { read_idx(img, lab, num_classes, limit); });
  return 0;
}
