// read_sequences. Input: [num_classes - 1][maxlen][flags][text]; flags bit 0: padding pre,
// bit 1: truncating pre.
#include "datasets/sequence_reader.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainer;
  static fuzz::ScratchFile file("sequences.txt");
  fuzz::InputBytes in(data, size);
  SequenceOptions o;
  o.num_classes = in.u8() + 1;
  o.maxlen = in.u8();
  const uint8_t flags = in.u8();
  o.pad_pre = flags & 1;
  o.trunc_pre = flags & 2;
  const std::string& path = file.write(in.rest());
  fuzz::expect_typed_errors([&] { read_sequences(path, o); });
  return 0;
}
