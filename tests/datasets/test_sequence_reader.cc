// pad_sequence (Keras pad_sequences semantics) and read_sequences.
#include <catch2/catch.hpp>

#include "datasets/sequence_reader.h"
#include "lib/core/error.h"
#include "tests/datasets/temp_files.h"

using namespace trainer;
using namespace trainer::dataset_tests;

TEST_CASE("pad_sequence pads with zeros before or after, like Keras padding='pre'/'post'", "[datasets]") {
  const std::vector<int64_t> s = {1, 2, 3};
  REQUIRE(pad_sequence(s, 5, true, true) == std::vector<float>{0, 0, 1, 2, 3});
  REQUIRE(pad_sequence(s, 5, false, true) == std::vector<float>{1, 2, 3, 0, 0});
  REQUIRE(pad_sequence(s, 3, true, false) == std::vector<float>{1, 2, 3});
  REQUIRE(pad_sequence({}, 2, true, true) == std::vector<float>{0, 0});
  REQUIRE(pad_sequence(s, 0, true, true).empty());
}

TEST_CASE("pad_sequence truncates from the start or the end, like Keras truncating='pre'/'post'",
          "[datasets]") {
  const std::vector<int64_t> s = {1, 2, 3, 4};
  REQUIRE(pad_sequence(s, 2, true, true) == std::vector<float>{3, 4});
  REQUIRE(pad_sequence(s, 2, true, false) == std::vector<float>{1, 2});
  REQUIRE(pad_sequence(s, 2, false, true) == std::vector<float>{3, 4});
  REQUIRE_THROWS_AS(pad_sequence(s, -1, true, true), DataError);
}

TEST_CASE("read_sequences pads to the longest sequence by default, zeros first", "[datasets]") {
  TempDir dir;
  write_text(dir.path("s.txt"), "1 5 6 7\n\n0 8\r\n1\n");
  SequenceOptions o;
  o.num_classes = 2;
  const Dataset d = read_sequences(dir.path("s.txt"), o);
  REQUIRE(d.dtype == SampleDtype::f32);
  REQUIRE(d.sample_shape == Shape{3});
  REQUIRE(d.labels == std::vector<int32_t>{1, 0, 1});
  REQUIRE(d.f32 == std::vector<float>{5, 6, 7, 0, 0, 8, 0, 0, 0});
}

TEST_CASE("read_sequences applies maxlen with post padding and post truncation", "[datasets]") {
  TempDir dir;
  write_text(dir.path("s.txt"), "2\t10 11 12 13\n0 9\n");
  SequenceOptions o;
  o.num_classes = 3;
  o.maxlen = 3;
  o.pad_pre = false;
  o.trunc_pre = false;
  const Dataset d = read_sequences(dir.path("s.txt"), o);
  REQUIRE(d.sample_shape == Shape{3});
  REQUIRE(d.f32 == std::vector<float>{10, 11, 12, 9, 0, 0});
  o.trunc_pre = true;
  REQUIRE(read_sequences(dir.path("s.txt"), o).f32 == std::vector<float>{11, 12, 13, 9, 0, 0});
}

TEST_CASE("read_sequences names file, line and token position of a bad token", "[datasets]") {
  TempDir dir;
  const std::string path = dir.path("s.txt");
  SequenceOptions o;
  o.num_classes = 2;
  write_text(path, "0 1 2\n1 4 5 x7\n");
  REQUIRE_THROWS_WITH(read_sequences(path, o),
                      Catch::Contains(path + ":2: token 3") && Catch::Contains("'x7'"));
  write_text(path, "0 1 -2\n");
  REQUIRE_THROWS_WITH(read_sequences(path, o), Catch::Contains(":1: token 2"));
  write_text(path, "0 16777217\n");
  REQUIRE_THROWS_WITH(read_sequences(path, o), Catch::Contains("0..16777216"));
}

TEST_CASE("read_sequences rejects bad labels, empty files and negative maxlen", "[datasets]") {
  TempDir dir;
  const std::string path = dir.path("s.txt");
  SequenceOptions o;
  o.num_classes = 2;
  write_text(path, "0 1\n2 3\n");
  REQUIRE_THROWS_WITH(read_sequences(path, o),
                      Catch::Contains(":2: label must be an integer in 0..1, found '2'"));
  write_text(path, "\n\n");
  REQUIRE_THROWS_WITH(read_sequences(path, o), Catch::Contains("has no samples"));
  write_text(path, "0\n1\n");
  REQUIRE_THROWS_WITH(read_sequences(path, o), Catch::Contains("every sequence is empty"));
  o.maxlen = -4;
  REQUIRE_THROWS_WITH(read_sequences(path, o), Catch::Contains("maxlen must be >= 0"));
}
