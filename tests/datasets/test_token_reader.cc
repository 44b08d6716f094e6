// format text and tokens (datasets/token_reader.h): windows of `context` tokens whose labels are
// the next token at every position; llm.c's header and nanoGPT's raw files; every error names
// the file and the place.
#include <catch2/catch.hpp>
#include <cstring>

#include "datasets/split.h"
#include "datasets/token_reader.h"
#include "lib/core/error.h"
#include "tests/datasets/temp_files.h"

using namespace trainer;
using dataset_tests::TempDir;
using dataset_tests::write_bytes;

namespace {

std::vector<uint8_t> raw_ids(const std::vector<uint16_t>& ids) {
  std::vector<uint8_t> b(ids.size() * 2);
  std::memcpy(b.data(), ids.data(), b.size());
  return b;
}

std::vector<uint8_t> llmc_file(const std::vector<uint16_t>& ids, int32_t count, int32_t version = 1) {
  std::vector<uint8_t> b(1024, 0);
  const int32_t head[3] = {20240520, version, count};
  std::memcpy(b.data(), head, sizeof head);
  const std::vector<uint8_t> body = raw_ids(ids);
  b.insert(b.end(), body.begin(), body.end());
  return b;
}

}  // namespace

TEST_CASE("format text: windows of bytes, labelled with the next byte at every position", "[data][tokens]") {
  TempDir dir;
  const std::string path = dir.path("t.txt");
  const std::string text = "hello, world";  // 12 bytes
  write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
  TokenWindowOptions o;
  o.context = 4;
  Dataset d = read_text_windows(path, o);
  // Windows start at 0, 4 (8 would need 8 + 4 + 1 = 13 bytes).
  REQUIRE(d.size() == 2);
  REQUIRE(d.sample_shape == Shape{4});
  REQUIRE(d.label_positions == 4);
  REQUIRE(d.dtype == SampleDtype::u8);
  REQUIRE(d.num_classes == 256);
  REQUIRE(std::string(d.u8.begin(), d.u8.begin() + 4) == "hell");
  REQUIRE(std::string(d.u8.begin() + 4, d.u8.end()) == "o, w");
  std::string next;
  for (int32_t y : d.labels) next += char(y);
  REQUIRE(next == "ello, wo");
  REQUIRE(d.target_layout().width == 4);
  REQUIRE(d.target_layout().row_bytes() == 16);

  SECTION("a stride below the context overlaps the windows") {
    o.stride = 3;  // starts 0, 3, 6 (9 + 5 > 12)
    d = read_text_windows(path, o);
    REQUIRE(d.size() == 3);
    REQUIRE(std::string(d.u8.begin() + 8, d.u8.end()) == " wor");
    REQUIRE(char(d.labels.back()) == 'l');
  }
  SECTION("limit keeps the first windows") {
    o.limit = 1;
    REQUIRE(read_text_windows(path, o).size() == 1);
  }
  SECTION("a text shorter than one window and its next byte is an error naming both") {
    o.context = 12;
    REQUIRE_THROWS_WITH(read_text_windows(path, o),
                        Catch::Contains(path) && Catch::Contains("12 tokens") && Catch::Contains("13"));
  }
  SECTION("bytes above a smaller num_classes are named") {
    o.num_classes = 100;  // 'h' is 104
    REQUIRE_THROWS_WITH(read_text_windows(path, o),
                        Catch::Contains("byte 0 is 104") && Catch::Contains("256"));
  }
}

TEST_CASE("format tokens: nanoGPT's raw uint16 and llm.c's header", "[data][tokens]") {
  TempDir dir;
  std::vector<uint16_t> ids;
  for (uint16_t i = 0; i < 11; ++i) ids.push_back(uint16_t(50000 + i));
  TokenWindowOptions o;
  o.context = 5;
  o.num_classes = 50257;
  const std::string raw = dir.path("raw.bin"), llmc = dir.path("llmc.bin");
  write_bytes(raw, raw_ids(ids));
  write_bytes(llmc, llmc_file(ids, 11));
  for (const std::string& path : {raw, llmc}) {
    INFO(path);
    const Dataset d = read_token_windows(path, o);
    REQUIRE(d.size() == 2);
    REQUIRE(d.dtype == SampleDtype::f32);
    REQUIRE(d.f32[0] == 50000.f);
    REQUIRE(d.f32[9] == 50009.f);
    REQUIRE(d.labels[0] == 50001);
    REQUIRE(d.labels[9] == 50010);
  }
  SECTION("an id outside the vocabulary names its place") {
    o.num_classes = 50005;
    REQUIRE_THROWS_WITH(read_token_windows(raw, o),
                        Catch::Contains("token 5 is id 50005") && Catch::Contains("data.num_classes"));
  }
  SECTION("an odd size, a lying header and a newer version are errors") {
    std::vector<uint8_t> odd = raw_ids(ids);
    odd.push_back(1);
    write_bytes(raw, odd);
    REQUIRE_THROWS_WITH(read_token_file(raw), Catch::Contains("odd count"));
    write_bytes(llmc, llmc_file(ids, 12));
    REQUIRE_THROWS_WITH(read_token_file(llmc), Catch::Contains("says 12 tokens"));
    write_bytes(llmc, llmc_file(ids, 11, 2));
    REQUIRE_THROWS_WITH(read_token_file(llmc), Catch::Contains("version 2"));
  }
}

TEST_CASE("a split of token windows takes the end of the text, never windows from between",
          "[data][tokens]") {
  TempDir dir;
  const std::string path = dir.path("t.txt");
  std::string text;
  for (int i = 0; i < 101; ++i) text += char('a' + i % 26);
  write_bytes(path, std::vector<uint8_t>(text.begin(), text.end()));
  TokenWindowOptions o;
  o.context = 10;
  const Dataset d = read_text_windows(path, o);
  REQUIRE(d.size() == 10);
  SplitOptions s;
  s.fraction = 0.2;
  const SplitResult r = split_validation(d, s);
  REQUIRE(r.train.size() == 8);
  REQUIRE(r.validation.size() == 2);
  REQUIRE(r.validation.label_positions == 10);
  REQUIRE(r.validation.labels.size() == 20);
  REQUIRE(std::vector<uint8_t>(r.validation.u8.begin(), r.validation.u8.end()) ==
          std::vector<uint8_t>(d.u8.begin() + 80, d.u8.end()));
  REQUIRE(r.validation.labels.front() == d.labels[80]);
  REQUIRE(r.note.find("end of the text") != std::string::npos);
}
