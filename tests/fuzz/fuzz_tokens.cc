// format text and tokens (datasets/token_reader.h). Input: [context][stride][num_classes, u16
// little-endian][flags][file]; flags bit 0: the file is a text (bytes as tokens), else a token
// file (raw uint16, or llm.c's header and ids).
#include "datasets/token_reader.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainer;
  static fuzz::ScratchFile file("tokens.bin");
  fuzz::InputBytes in(data, size);
  TokenWindowOptions o;
  o.context = in.u8() + 1;
  o.stride = in.u8();
  o.num_classes = in.u16();
  const bool text = in.u8() & 1;
  const std::string& path = file.write(in.rest());
  fuzz::expect_typed_errors([&] { text ? read_text_windows(path, o) : read_token_windows(path, o); });
  return 0;
}
