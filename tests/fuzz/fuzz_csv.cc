// read_csv. Input: [flags][num_classes - 1][label column, int8][text].
// flags bit 0: header; bits 1-2: delimiter , ; tab space; bit 3: label column by the name
// "label" instead of the index.
#include "datasets/csv_reader.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainer;
  static fuzz::ScratchFile file("data.csv");
  fuzz::InputBytes in(data, size);
  const uint8_t flags = in.u8();
  CsvOptions o;
  o.has_header = flags & 1;
  o.delimiter = ",;\t "[(flags >> 1) & 3];
  o.num_classes = in.u8() + 1;
  const int8_t column = int8_t(in.u8());
  o.label_columns = {flags & 8 ? "label" : std::to_string(column)};
  const std::string& path = file.write(in.rest());
  fuzz::expect_typed_errors([&] { read_csv(path, o); });
  return 0;
}
