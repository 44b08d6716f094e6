// NPY: write_npy_f32 / read_npy round trips, hand-built headers of every accepted kind, the
// rejected layouts, and dataset_from_npy's checks.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>

#include "datasets/file_bytes.h"
#include "datasets/npy_reader.h"
#include "lib/core/error.h"
#include "tests/datasets/temp_files.h"

using namespace trainer;
using namespace trainer::dataset_tests;

namespace {

// A .npy file with the given header dict and raw little-endian data, format version `major`.
std::vector<uint8_t> npy_file(const std::string& dict, const std::vector<uint8_t>& data, int major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::vector<uint8_t> b = to_bytes(std::string("\x93NUMPY", 6));
  b.push_back(static_cast<uint8_t>(major));
  b.push_back(0);
  for (size_t i = 0; i < prefix - 8; ++i) b.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  b.insert(b.end(), header.begin(), header.end());
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

template <typename T>
std::vector<uint8_t> raw(const std::vector<T>& values) {
  std::vector<uint8_t> b(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(b.data(), values.data(), b.size());
  return b;
}

std::string dict(const std::string& descr, const std::string& shape, const std::string& fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }";
}

}  // namespace

TEST_CASE("write_npy_f32 writes numpy's exact v1.0 layout and read_npy reads it back", "[datasets]") {
  TempDir dir;
  const std::vector<float> v = {1.5f, -2.f, 0.f, 3.25f, 1e-8f, 6.f};
  write_npy_f32(dir.path("a.npy"), {2, 3}, v.data());
  const std::vector<uint8_t> bytes = read_file_bytes(dir.path("a.npy"));
  const std::string expected_header = std::string("\x93NUMPY\x01\x00v\x00", 10) +
                                      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" +
                                      std::string(58, ' ') + "\n";  // what np.save writes
  REQUIRE(std::string(bytes.begin(), bytes.begin() + 128) == expected_header);
  REQUIRE(bytes.size() == 128 + 24);

  const NpyArray a = read_npy(dir.path("a.npy"));
  REQUIRE(a.descr == "<f4");
  REQUIRE(a.shape == std::vector<int64_t>{2, 3});
  REQUIRE(a.f32 == v);
  REQUIRE(a.numel() == 6);
}

TEST_CASE("write_npy_f32 handles 1-d and 0-d shapes", "[datasets]") {
  TempDir dir;
  const float v[3] = {1.f, 2.f, 3.f};
  write_npy_f32(dir.path("v.npy"), {3}, v);
  REQUIRE(read_npy(dir.path("v.npy")).shape == std::vector<int64_t>{3});
  REQUIRE(read_file_bytes(dir.path("v.npy")).size() % 4 == 0);
  write_npy_f32(dir.path("s.npy"), {}, v);
  const NpyArray s = read_npy(dir.path("s.npy"));
  REQUIRE(s.shape.empty());
  REQUIRE(s.f32 == std::vector<float>{1.f});
  REQUIRE_THROWS_WITH(write_npy_f32(dir.path("no_dir/x.npy"), {1}, v), Catch::Contains("cannot create"));
}

TEST_CASE("read_npy accepts uint8, int32, int64, float32 and float64 arrays", "[datasets]") {
  TempDir dir;
  write_bytes(dir.path("u1.npy"), npy_file(dict("|u1", "(2, 2)"), {0, 1, 254, 255}));
  write_bytes(dir.path("i4.npy"), npy_file(dict("<i4", "(3,)"), raw<int32_t>({-7, 0, 2147483647})));
  write_bytes(dir.path("i8.npy"), npy_file(dict("<i8", "(2,)"), raw<int64_t>({-1, int64_t(1) << 40})));
  write_bytes(dir.path("f8.npy"), npy_file(dict("<f8", "(2,)"), raw<double>({0.1, -3.0})));
  REQUIRE(read_npy(dir.path("u1.npy")).u8 == std::vector<uint8_t>{0, 1, 254, 255});
  REQUIRE(read_npy(dir.path("i4.npy")).i64 == std::vector<int64_t>{-7, 0, 2147483647});
  REQUIRE(read_npy(dir.path("i8.npy")).i64 == std::vector<int64_t>{-1, int64_t(1) << 40});
  REQUIRE(read_npy(dir.path("f8.npy")).f32 == std::vector<float>{0.1f, -3.0f});
}

TEST_CASE("read_npy parses v2/v3 headers, any key order, double quotes and Python 2 longs", "[datasets]") {
  TempDir dir;
  write_bytes(dir.path("v2.npy"), npy_file(dict("<f4", "(1, 2)"), raw<float>({1.f, 2.f}), 2));
  write_bytes(dir.path("v3.npy"), npy_file(dict("<f4", "(2,)"), raw<float>({1.f, 2.f}), 3));
  write_bytes(dir.path("odd.npy"),
              npy_file("{\"shape\": (2L, 1L), \"fortran_order\": False, \"descr\": \"<u1\"}", {5, 6}));
  REQUIRE(read_npy(dir.path("v2.npy")).shape == std::vector<int64_t>{1, 2});
  REQUIRE(read_npy(dir.path("v3.npy")).f32 == std::vector<float>{1.f, 2.f});
  const NpyArray odd = read_npy(dir.path("odd.npy"));
  REQUIRE(odd.shape == std::vector<int64_t>{2, 1});
  REQUIRE(odd.u8 == std::vector<uint8_t>{5, 6});
}

TEST_CASE("read_npy reads a gzip-compressed .npy", "[datasets]") {
  TempDir dir;
  write_gz(dir.path("a.npy.gz"), npy_file(dict("<f4", "(2,)"), raw<float>({4.f, 5.f})));
  REQUIRE(read_npy(dir.path("a.npy.gz")).f32 == std::vector<float>{4.f, 5.f});
}

TEST_CASE("read_npy rejects Fortran order, object arrays, big-endian and other dtypes", "[datasets]") {
  TempDir dir;
  write_bytes(dir.path("f.npy"), npy_file(dict("<f4", "(2, 2)", "True"), raw<float>({1, 2, 3, 4})));
  REQUIRE_THROWS_WITH(read_npy(dir.path("f.npy")),
                      Catch::Contains("Fortran") && Catch::Contains("ascontiguousarray"));
  write_bytes(dir.path("o.npy"), npy_file(dict("|O", "(2,)"), raw<int64_t>({0, 0})));
  REQUIRE_THROWS_WITH(read_npy(dir.path("o.npy")), Catch::Contains("object array"));
  write_bytes(dir.path("be.npy"), npy_file(dict(">f4", "(1,)"), raw<float>({1})));
  REQUIRE_THROWS_WITH(read_npy(dir.path("be.npy")),
                      Catch::Contains("big-endian") && Catch::Contains("astype('<f4')"));
  write_bytes(dir.path("c.npy"), npy_file(dict("<c8", "(1,)"), raw<float>({1, 2})));
  REQUIRE_THROWS_WITH(read_npy(dir.path("c.npy")), Catch::Contains("unsupported dtype '<c8'"));
  write_bytes(
      dir.path("s.npy"),
      npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", raw<float>({1})));
  REQUIRE_THROWS_WITH(read_npy(dir.path("s.npy")), Catch::Contains("structured dtypes"));
}

TEST_CASE("read_npy rejects truncated data, trailing bytes, bad magic and empty files", "[datasets]") {
  TempDir dir;
  write_bytes(dir.path("t.npy"), npy_file(dict("<f4", "(3,)"), raw<float>({1, 2})));
  REQUIRE_THROWS_WITH(read_npy(dir.path("t.npy")),
                      Catch::Contains("is truncated") && Catch::Contains("needs 140 bytes, file has 136"));
  write_bytes(dir.path("x.npy"), npy_file(dict("<f4", "(1,)"), raw<float>({1, 2})));
  REQUIRE_THROWS_WITH(read_npy(dir.path("x.npy")), Catch::Contains("has trailing bytes"));
  std::vector<uint8_t> cut_header = npy_file(dict("<f4", "(1,)"), {});
  cut_header.resize(30);
  write_bytes(dir.path("h.npy"), cut_header);
  REQUIRE_THROWS_WITH(read_npy(dir.path("h.npy")), Catch::Contains("truncated inside its header"));
  write_text(dir.path("m.npy"), "PK\x03\x04 this is a zip");
  REQUIRE_THROWS_WITH(read_npy(dir.path("m.npy")), Catch::Contains("NPY magic"));
  write_bytes(dir.path("e.npy"), {});
  REQUIRE_THROWS_WITH(read_npy(dir.path("e.npy")), Catch::Contains("e.npy' is empty"));
  write_bytes(dir.path("k.npy"), npy_file("{'descr': '<f4', 'shape': (1,), }", raw<float>({1})));
  REQUIRE_THROWS_WITH(read_npy(dir.path("k.npy")), Catch::Contains("lacks one of"));
}

TEST_CASE("dataset_from_npy keeps uint8 images as u8 with sample_shape x.shape minus its first axis",
          "[datasets]") {
  TempDir dir;
  std::vector<uint8_t> px(3 * 4);
  for (size_t i = 0; i < px.size(); ++i) px[i] = static_cast<uint8_t>(i * 10);
  write_bytes(dir.path("x.npy"), npy_file(dict("|u1", "(3, 1, 2, 2)"), px));
  write_bytes(dir.path("y.npy"), npy_file(dict("<i8", "(3,)"), raw<int64_t>({2, 0, 1})));
  const Dataset d = dataset_from_npy(dir.path("x.npy"), dir.path("y.npy"), 3);
  REQUIRE(d.dtype == SampleDtype::u8);
  REQUIRE(d.sample_shape == Shape{1, 2, 2});
  REQUIRE(d.u8 == px);
  REQUIRE(d.labels == std::vector<int32_t>{2, 0, 1});
  REQUIRE(d.num_classes == 3);
}

TEST_CASE("dataset_from_npy converts integer token ids to f32 exactly and accepts (N, 1) labels",
          "[datasets]") {
  TempDir dir;
  write_bytes(dir.path("x.npy"), npy_file(dict("<i4", "(2, 3)"), raw<int32_t>({1, 16777216, 0, 5, 4, 3})));
  write_bytes(dir.path("y.npy"), npy_file(dict("|u1", "(2, 1)"), {1, 0}));
  const Dataset d = dataset_from_npy(dir.path("x.npy"), dir.path("y.npy"), 2);
  REQUIRE(d.dtype == SampleDtype::f32);
  REQUIRE(d.sample_shape == Shape{3});
  REQUIRE(d.f32 == std::vector<float>{1, 16777216, 0, 5, 4, 3});
  REQUIRE(d.labels == std::vector<int32_t>{1, 0});

  write_bytes(dir.path("big.npy"), npy_file(dict("<i8", "(2, 1)"), raw<int64_t>({3, 16777217})));
  REQUIRE_THROWS_WITH(dataset_from_npy(dir.path("big.npy"), dir.path("y.npy"), 2),
                      Catch::Contains("element 1 is 16777217") && Catch::Contains("cannot hold exactly"));
}

TEST_CASE("dataset_from_npy gives float x as f32 and a 1-d x sample_shape (1)", "[datasets]") {
  TempDir dir;
  write_bytes(dir.path("x.npy"), npy_file(dict("<f4", "(3,)"), raw<float>({0.5f, 1.5f, 2.5f})));
  write_bytes(dir.path("y.npy"), npy_file(dict("<i4", "(3,)"), raw<int32_t>({0, 1, 0})));
  const Dataset d = dataset_from_npy(dir.path("x.npy"), dir.path("y.npy"), 2);
  REQUIRE(d.sample_shape == Shape{1});
  REQUIRE(d.f32 == std::vector<float>{0.5f, 1.5f, 2.5f});
}

TEST_CASE("dataset_from_npy checks label dtype, shape, count and range", "[datasets]") {
  TempDir dir;
  write_bytes(dir.path("x.npy"), npy_file(dict("<f4", "(3, 2)"), raw<float>({0, 1, 2, 3, 4, 5})));
  write_bytes(dir.path("yf.npy"), npy_file(dict("<f4", "(3,)"), raw<float>({0, 1, 0})));
  REQUIRE_THROWS_WITH(dataset_from_npy(dir.path("x.npy"), dir.path("yf.npy"), 2),
                      Catch::Contains("floating-point") && Catch::Contains("astype('int64')"));
  write_bytes(dir.path("yn.npy"), npy_file(dict("<i8", "(2,)"), raw<int64_t>({0, 1})));
  REQUIRE_THROWS_WITH(dataset_from_npy(dir.path("x.npy"), dir.path("yn.npy"), 2),
                      Catch::Contains("has shape (2,); expected (3,) or (3, 1)"));
  write_bytes(dir.path("y2.npy"), npy_file(dict("<i8", "(3, 2)"), raw<int64_t>({0, 1, 0, 1, 0, 1})));
  REQUIRE_THROWS_WITH(dataset_from_npy(dir.path("x.npy"), dir.path("y2.npy"), 2), Catch::Contains("(3, 2)"));
  write_bytes(dir.path("yr.npy"), npy_file(dict("<i8", "(3,)"), raw<int64_t>({0, -1, 5})));
  REQUIRE_THROWS_WITH(dataset_from_npy(dir.path("x.npy"), dir.path("yr.npy"), 2),
                      Catch::Contains("label -1 at index 1 is out of range for num_classes=2"));
  write_bytes(dir.path("x0.npy"), npy_file(dict("<f4", "(0, 2)"), {}));
  REQUIRE_THROWS_WITH(dataset_from_npy(dir.path("x0.npy"), dir.path("yr.npy"), 2),
                      Catch::Contains("holds no samples"));
}

TEST_CASE("dataset_from_npy with value targets: float y of shape (N) or (N, K), integers as floats",
          "[datasets][npy]") {
  TempDir dir;
  write_bytes(dir.path("x.npy"), npy_file(dict("<f4", "(3, 1)"), raw<float>({1, 2, 3})));
  write_bytes(dir.path("y.npy"), npy_file(dict("<f8", "(3,)"), raw<double>({0.5, -1.25, 100})));
  write_bytes(dir.path("m.npy"), npy_file(dict("<i8", "(3, 2)"), raw<int64_t>({1, 0, 0, 0, 1, 1})));
  const TargetLayout values{TargetKind::values, 0};
  Dataset d = dataset_from_npy(dir.path("x.npy"), dir.path("y.npy"), 0, false, values);
  REQUIRE(d.target_width == 1);
  REQUIRE(d.targets == std::vector<float>{0.5f, -1.25f, 100.f});
  REQUIRE(d.labels.empty());
  REQUIRE(d.size() == 3);
  d = dataset_from_npy(dir.path("x.npy"), dir.path("m.npy"), 0, false, values);  // multi-hot rows
  REQUIRE(d.target_width == 2);
  REQUIRE(d.targets == std::vector<float>{1, 0, 0, 0, 1, 1});
  // For class indices, float y and 2-D y of several columns are refused, saying why.
  REQUIRE_THROWS_WITH(dataset_from_npy(dir.path("x.npy"), dir.path("y.npy"), 2),
                      Catch::Contains("holds floating-point values"));
  REQUIRE_THROWS_WITH(dataset_from_npy(dir.path("x.npy"), dir.path("m.npy"), 2),
                      Catch::Contains("a 2-D y of several columns needs a loss that takes value targets"));
  write_bytes(dir.path("n.npy"), npy_file(dict("<f4", "(3,)"), raw<float>({0, std::nanf(""), 1})));
  REQUIRE_THROWS_WITH(dataset_from_npy(dir.path("x.npy"), dir.path("n.npy"), 0, false, values),
                      Catch::Contains("element 1 (sample 1) is not a finite number"));
}
