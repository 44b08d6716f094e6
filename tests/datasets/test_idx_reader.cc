// read_idx on generated MNIST-style files: round trip (raw and gzip), limits, and every
// validation error.
#include <catch2/catch.hpp>

#include "datasets/idx_reader.h"
#include "lib/core/error.h"
#include "tests/datasets/temp_files.h"

using namespace trainer;
using namespace trainer::dataset_tests;

namespace {

void put_be32(std::vector<uint8_t>* b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b->push_back(static_cast<uint8_t>(v >> s));
}

// n images of rows x cols; pixel (i, r, c) = i * 31 + r * 7 + c (mod 256).
std::vector<uint8_t> idx_images(uint32_t n, uint32_t rows, uint32_t cols, uint32_t magic = 0x803) {
  std::vector<uint8_t> b;
  put_be32(&b, magic);
  put_be32(&b, n);
  put_be32(&b, rows);
  put_be32(&b, cols);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t c = 0; c < cols; ++c) b.push_back(static_cast<uint8_t>(i * 31 + r * 7 + c));
  return b;
}

std::vector<uint8_t> idx_labels(const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> b;
  put_be32(&b, 0x801);
  put_be32(&b, static_cast<uint32_t>(labels.size()));
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}

struct IdxFiles {
  TempDir dir;
  std::string images = dir.path("images.idx"), labels = dir.path("labels.idx");
  IdxFiles(const std::vector<uint8_t>& img, const std::vector<uint8_t>& lab) {
    write_bytes(images, img);
    write_bytes(labels, lab);
  }
};

}  // namespace

TEST_CASE("read_idx loads uint8 images as (1, rows, cols) with their labels", "[datasets]") {
  IdxFiles f(idx_images(3, 4, 5), idx_labels({7, 0, 9}));
  const Dataset d = read_idx(f.images, f.labels, 10);
  REQUIRE(d.sample_shape == Shape{1, 4, 5});
  REQUIRE(d.dtype == SampleDtype::u8);
  REQUIRE(d.size() == 3);
  REQUIRE(d.num_classes == 10);
  REQUIRE(d.name == f.images);
  REQUIRE(d.labels == std::vector<int32_t>{7, 0, 9});
  const std::vector<uint8_t> file = idx_images(3, 4, 5);
  REQUIRE(d.u8 == std::vector<uint8_t>(file.begin() + 16, file.end()));
  REQUIRE(d.u8[2 * 20 + 3 * 5 + 4] == static_cast<uint8_t>(2 * 31 + 3 * 7 + 4));  // sample 2, row 3, col 4
}

TEST_CASE("read_idx reads gzip-compressed IDX files like the raw ones", "[datasets]") {
  TempDir dir;
  write_gz(dir.path("img.gz"), idx_images(6, 28, 28));
  write_gz(dir.path("lab.gz"), idx_labels({1, 2, 3, 4, 5, 6}));
  IdxFiles raw(idx_images(6, 28, 28), idx_labels({1, 2, 3, 4, 5, 6}));
  const Dataset gz = read_idx(dir.path("img.gz"), dir.path("lab.gz"), 10);
  const Dataset plain = read_idx(raw.images, raw.labels, 10);
  REQUIRE(gz.u8 == plain.u8);
  REQUIRE(gz.labels == plain.labels);
  REQUIRE(gz.sample_shape == Shape{1, 28, 28});
}

TEST_CASE("read_idx with a limit keeps only the first samples", "[datasets]") {
  IdxFiles f(idx_images(5, 2, 2), idx_labels({0, 1, 2, 3, 4}));
  const Dataset d = read_idx(f.images, f.labels, 5, 2);
  REQUIRE(d.size() == 2);
  REQUIRE(d.u8.size() == 8);
  REQUIRE(d.labels == std::vector<int32_t>{0, 1});
  REQUIRE(read_idx(f.images, f.labels, 5, 100).size() == 5);
  REQUIRE(read_idx(f.images, f.labels, 5, 0).size() == 5);
  REQUIRE_THROWS_WITH(read_idx(f.images, f.labels, 5, -1), Catch::Contains("limit must be >= 0"));
}

TEST_CASE("read_idx reports truncated and oversized files with expected and actual sizes", "[datasets]") {
  std::vector<uint8_t> img = idx_images(2, 3, 3);  // 16 + 18 = 34 bytes
  img.pop_back();
  IdxFiles cut(img, idx_labels({0, 1}));
  REQUIRE_THROWS_AS(read_idx(cut.images, cut.labels, 10), DataError);
  REQUIRE_THROWS_WITH(read_idx(cut.images, cut.labels, 10),
                      Catch::Contains("images.idx' is truncated") &&
                          Catch::Contains("2 x 3 x 3 images = 34 bytes") && Catch::Contains("file has 33"));
  std::vector<uint8_t> lab = idx_labels({0, 1});
  lab.push_back(0);
  IdxFiles extra(idx_images(2, 3, 3), lab);
  REQUIRE_THROWS_WITH(
      read_idx(extra.images, extra.labels, 10),
      Catch::Contains("labels.idx' has trailing bytes") && Catch::Contains("10 bytes, file has 11"));
  const std::vector<uint8_t> one = idx_images(1, 1, 1);
  IdxFiles header_only(std::vector<uint8_t>(one.begin(), one.begin() + 10), idx_labels({0}));
  REQUIRE_THROWS_WITH(read_idx(header_only.images, header_only.labels, 10),
                      Catch::Contains("too short for its header: 10 bytes, need at least 16"));
}

TEST_CASE("read_idx rejects a wrong magic number and says what the file looks like", "[datasets]") {
  IdxFiles swapped(idx_labels({0, 1}), idx_images(2, 2, 2));
  REQUIRE_THROWS_WITH(
      read_idx(swapped.images, swapped.labels, 10),
      Catch::Contains("magic number 0x00000801, expected 0x00000803") && Catch::Contains("swapped"));
  IdxFiles floats(idx_images(1, 1, 1, 0x0D03), idx_labels({0}));
  REQUIRE_THROWS_WITH(read_idx(floats.images, floats.labels, 10),
                      Catch::Contains("float32") && Catch::Contains("only uint8"));
  IdxFiles text(to_bytes("P5 this is a PGM file, not IDX"), idx_labels({0}));
  REQUIRE_THROWS_WITH(read_idx(text.images, text.labels, 10), Catch::Contains("not an IDX file"));
}

TEST_CASE("read_idx rejects empty files and zero dimensions", "[datasets]") {
  IdxFiles empty({}, idx_labels({0}));
  REQUIRE_THROWS_WITH(read_idx(empty.images, empty.labels, 10), Catch::Contains("images.idx' is empty"));
  IdxFiles zero_rows(idx_images(1, 0, 4), idx_labels({0}));
  REQUIRE_THROWS_WITH(read_idx(zero_rows.images, zero_rows.labels, 10),
                      Catch::Contains("dimension 1 (rows) is 0"));
}

TEST_CASE("read_idx requires as many labels as images", "[datasets]") {
  IdxFiles f(idx_images(3, 2, 2), idx_labels({0, 1}));
  REQUIRE_THROWS_WITH(read_idx(f.images, f.labels, 10),
                      Catch::Contains("holds 3 images") && Catch::Contains("holds 2 labels"));
}

TEST_CASE("read_idx reports the first out-of-range label with its index", "[datasets]") {
  IdxFiles f(idx_images(4, 1, 1), idx_labels({0, 9, 10, 12}));
  REQUIRE_THROWS_WITH(read_idx(f.images, f.labels, 10),
                      Catch::Contains("label 10 at index 2") && Catch::Contains("num_classes=10"));
  REQUIRE_THROWS_WITH(read_idx(f.images, f.labels, 10, 1), Catch::Contains("label 10 at index 2"));
  REQUIRE_THROWS_WITH(read_idx(f.images, f.labels, 0), Catch::Contains("num_classes must be in 1..256"));
}
