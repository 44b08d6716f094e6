// read_idx on gzip files made from the input, so the streaming header checks see well-formed
// gzip around hostile IDX content (lying sizes, short or long payloads, split members).
// Input: [num_classes - 1][limit][flags][labels length, u16 LE][labels file][images file];
// flags bit 0: gzip the labels too; bit 1: write the images as two gzip members.
#include "datasets/idx_reader.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainer;
  static fuzz::ScratchFile images("images.idx.gz"), labels("labels.idx.gz");
  fuzz::InputBytes in(data, size);
  const int num_classes = in.u8() + 1;
  const int64_t limit = in.u8();
  const uint8_t flags = in.u8();
  const uint16_t labels_len = in.u16();
  std::vector<uint8_t> lab_bytes = in.take(labels_len);
  std::vector<uint8_t> img_bytes = in.rest();
  const std::string& lab = labels.write(flags & 1 ? fuzz::gzip(lab_bytes) : lab_bytes);
  const std::string& img = images.write(fuzz::gzip(img_bytes, flags & 2 ? img_bytes.size() / 2 : 0));
  fuzz::expect_typed_errors([&] { read_idx(img, lab, num_classes, limit); });
  return 0;
}
