// read_cifar10 on generated binary batches: CHW round trip across files, gzip, and errors.
#include <catch2/catch.hpp>

#include "datasets/cifar10_reader.h"
#include "lib/core/error.h"
#include "tests/datasets/temp_files.h"

using namespace trainer;
using namespace trainer::dataset_tests;

namespace {

// Records with labels `labels`; pixel (channel c, row h, col w) of record r = r + 3c + 5h + 7w.
std::vector<uint8_t> cifar_records(const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> b;
  for (size_t r = 0; r < labels.size(); ++r) {
    b.push_back(labels[r]);
    for (int c = 0; c < 3; ++c)
      for (int h = 0; h < 32; ++h)
        for (int w = 0; w < 32; ++w) b.push_back(static_cast<uint8_t>(r + 3 * c + 5 * h + 7 * w));
  }
  return b;
}

}  // namespace

TEST_CASE("read_cifar10 concatenates files into (3, 32, 32) CHW samples with labels", "[datasets]") {
  TempDir dir;
  write_bytes(dir.path("data_batch_1.bin"), cifar_records({3, 9}));
  write_bytes(dir.path("data_batch_2.bin"), cifar_records({0}));
  const Dataset d = read_cifar10({dir.path("data_batch_1.bin"), dir.path("data_batch_2.bin")});
  REQUIRE(d.sample_shape == Shape{3, 32, 32});
  REQUIRE(d.dtype == SampleDtype::u8);
  REQUIRE(d.num_classes == 10);
  REQUIRE(d.labels == std::vector<int32_t>{3, 9, 0});
  REQUIRE(d.u8.size() == 3 * 3072u);
  // sample 1, channel 2 (blue), row 4, column 6
  REQUIRE(d.u8[1 * 3072 + 2 * 1024 + 4 * 32 + 6] == static_cast<uint8_t>(1 + 3 * 2 + 5 * 4 + 7 * 6));
  // sample 2 is record 0 of the second file
  REQUIRE(d.u8[2 * 3072 + 1 * 1024 + 31 * 32 + 31] == static_cast<uint8_t>(3 + 5 * 31 + 7 * 31));
}

TEST_CASE("read_cifar10 reads gzip-compressed batches", "[datasets]") {
  TempDir dir;
  write_gz(dir.path("test_batch.bin.gz"), cifar_records({1, 2, 3}));
  write_bytes(dir.path("test_batch.bin"), cifar_records({1, 2, 3}));
  const Dataset gz = read_cifar10({dir.path("test_batch.bin.gz")});
  const Dataset raw = read_cifar10({dir.path("test_batch.bin")});
  REQUIRE(gz.u8 == raw.u8);
  REQUIRE(gz.labels == raw.labels);
}

TEST_CASE("read_cifar10 rejects a file that is not a whole number of 3073-byte records", "[datasets]") {
  TempDir dir;
  std::vector<uint8_t> bytes = cifar_records({1, 2});
  bytes.resize(bytes.size() - 100);
  write_bytes(dir.path("cut.bin"), bytes);
  REQUIRE_THROWS_AS(read_cifar10({dir.path("cut.bin")}), DataError);
  REQUIRE_THROWS_WITH(read_cifar10({dir.path("cut.bin")}),
                      Catch::Contains("cut.bin") &&
                          Catch::Contains("not a multiple of the 3073-byte record") &&
                          Catch::Contains("1 whole records and 2973 bytes left over"));
}

TEST_CASE("read_cifar10 reports a label above 9 with its record index", "[datasets]") {
  TempDir dir;
  write_bytes(dir.path("bad.bin"), cifar_records({4, 10, 11}));
  REQUIRE_THROWS_WITH(read_cifar10({dir.path("bad.bin")}),
                      Catch::Contains("record 1 (byte offset 3073) has label 10, expected 0..9"));
}

TEST_CASE("read_cifar10 rejects an empty file and an empty file list", "[datasets]") {
  TempDir dir;
  write_bytes(dir.path("empty.bin"), {});
  REQUIRE_THROWS_WITH(read_cifar10({dir.path("empty.bin")}), Catch::Contains("empty.bin' is empty"));
  REQUIRE_THROWS_WITH(read_cifar10({}), Catch::Contains("no data files"));
  REQUIRE_THROWS_WITH(read_cifar10({dir.path("missing.bin")}), Catch::Contains("cannot open"));
}
