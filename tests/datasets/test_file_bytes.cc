// read_file_bytes: raw passthrough, transparent gunzip, and the errors for missing, truncated
// and corrupt files.
#include <catch2/catch.hpp>

#include "datasets/file_bytes.h"
#include "lib/core/error.h"
#include "tests/datasets/temp_files.h"

using namespace trainer;
using namespace trainer::dataset_tests;

namespace {

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 7919) ^ (i >> 9));
  return v;
}

}  // namespace

TEST_CASE("read_file_bytes returns a raw file's bytes unchanged, zeros included", "[datasets]") {
  TempDir dir;
  const std::vector<uint8_t> data = {0, 1, 2, 0, 255, 0x1f};
  write_bytes(dir.path("raw.bin"), data);
  REQUIRE(read_file_bytes(dir.path("raw.bin")) == data);
}

TEST_CASE("read_file_bytes returns an empty vector for an empty file", "[datasets]") {
  TempDir dir;
  write_bytes(dir.path("empty"), {});
  REQUIRE(read_file_bytes(dir.path("empty")).empty());
}

TEST_CASE("read_file_bytes gunzips a gzip file transparently, however well it compresses", "[datasets]") {
  TempDir dir;
  const std::vector<uint8_t> data = pattern(3 << 20);
  write_gz(dir.path("data.gz"), data);
  REQUIRE(read_file_bytes(dir.path("data.gz")) == data);
  const std::vector<uint8_t> zeros(5 << 20, 0);  // ~1000x compression: exercises buffer growth
  write_gz(dir.path("zeros.gz"), zeros);
  REQUIRE(read_file_bytes(dir.path("zeros.gz")) == zeros);
}

TEST_CASE("read_file_bytes joins concatenated gzip members like gunzip", "[datasets]") {
  TempDir dir;
  std::vector<uint8_t> joined = gzip_bytes(to_bytes("hello "), dir.path("a.gz"));
  const std::vector<uint8_t> second = gzip_bytes(to_bytes("world"), dir.path("b.gz"));
  joined.insert(joined.end(), second.begin(), second.end());
  write_bytes(dir.path("ab.gz"), joined);
  REQUIRE(read_file_bytes(dir.path("ab.gz")) == to_bytes("hello world"));
}

TEST_CASE("read_file_bytes rejects a truncated gzip file", "[datasets]") {
  TempDir dir;
  std::vector<uint8_t> gz = gzip_bytes(pattern(100000), dir.path("full.gz"));
  gz.resize(gz.size() / 2);
  write_bytes(dir.path("cut.gz"), gz);
  REQUIRE_THROWS_AS(read_file_bytes(dir.path("cut.gz")), DataError);
  REQUIRE_THROWS_WITH(read_file_bytes(dir.path("cut.gz")),
                      Catch::Contains("cut.gz") && Catch::Contains("truncated"));
  gz.resize(12);  // only part of the gzip header
  write_bytes(dir.path("header.gz"), gz);
  REQUIRE_THROWS_WITH(read_file_bytes(dir.path("header.gz")), Catch::Contains("truncated"));
}

TEST_CASE("read_file_bytes rejects corrupt gzip data and a bad checksum", "[datasets]") {
  TempDir dir;
  std::vector<uint8_t> gz = gzip_bytes(pattern(1000), dir.path("full.gz"));
  std::vector<uint8_t> bad_crc = gz;
  bad_crc[bad_crc.size() - 6] ^= 0xFF;  // inside the CRC32 trailer
  write_bytes(dir.path("crc.gz"), bad_crc);
  REQUIRE_THROWS_WITH(read_file_bytes(dir.path("crc.gz")), Catch::Contains("not valid gzip data"));
  std::vector<uint8_t> bad_method = gz;
  bad_method[2] = 7;  // compression method must be 8 (deflate)
  write_bytes(dir.path("method.gz"), bad_method);
  REQUIRE_THROWS_WITH(read_file_bytes(dir.path("method.gz")), Catch::Contains("not valid gzip data"));
}

TEST_CASE("read_file_bytes rejects bytes after the gzip data that are not another member", "[datasets]") {
  TempDir dir;
  std::vector<uint8_t> gz = gzip_bytes(to_bytes("payload"), dir.path("full.gz"));
  gz.push_back('x');
  gz.push_back('y');
  write_bytes(dir.path("tail.gz"), gz);
  REQUIRE_THROWS_WITH(read_file_bytes(dir.path("tail.gz")), Catch::Contains("2 unexpected bytes"));
}

TEST_CASE("read_file_bytes names the path and the system error for unreadable files", "[datasets]") {
  TempDir dir;
  const std::string missing = dir.path("no_such_file.idx");
  REQUIRE_THROWS_AS(read_file_bytes(missing), DataError);
  REQUIRE_THROWS_WITH(read_file_bytes(missing),
                      Catch::Contains(missing) && Catch::Contains("No such file or directory"));
  REQUIRE_THROWS_WITH(read_file_bytes(dir.path("")), Catch::Contains("is a directory, not a regular file"));
}
