// split_validation: Keras validation_split sizes and order, dtypes, and the empty-side errors.
#include <catch2/catch.hpp>

#include "datasets/split.h"
#include "lib/core/error.h"

using namespace trainer;

namespace {

// n samples of shape (2), sample i = {i, 100 + i}, label i % 3; u8 or f32.
Dataset numbered(int64_t n, SampleDtype dtype) {
  Dataset d;
  d.name = "numbered";
  d.sample_shape = Shape{2};
  d.dtype = dtype;
  d.num_classes = 3;
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == SampleDtype::u8) {
      d.u8.push_back(static_cast<uint8_t>(i));
      d.u8.push_back(static_cast<uint8_t>(100 + i));
    } else {
      d.f32.push_back(static_cast<float>(i));
      d.f32.push_back(static_cast<float>(100 + i));
    }
    d.labels.push_back(static_cast<int32_t>(i % 3));
  }
  return d;
}

}  // namespace

TEST_CASE("split_validation takes the last fraction as validation, sized like Keras", "[datasets]") {
  const auto [train, val] = split_validation(numbered(10, SampleDtype::f32), 0.2);
  REQUIRE(train.size() == 8);
  REQUIRE(val.size() == 2);
  REQUIRE(val.f32 == std::vector<float>{8, 108, 9, 109});
  REQUIRE(val.labels == std::vector<int32_t>{2, 0});
  REQUIRE(train.f32.front() == 0.f);
  REQUIRE(train.f32.back() == 107.f);
  REQUIRE(train.sample_shape == Shape{2});
  REQUIRE(val.num_classes == 3);
  REQUIRE(val.dtype == SampleDtype::f32);
  // Keras: split_at = int(10 * (1 - 0.25)) = int(7.5) = 7
  REQUIRE(split_validation(numbered(10, SampleDtype::f32), 0.25).first.size() == 7);
}

TEST_CASE("split_validation copies uint8 samples", "[datasets]") {
  const auto [train, val] = split_validation(numbered(4, SampleDtype::u8), 0.5);
  REQUIRE(train.u8 == std::vector<uint8_t>{0, 100, 1, 101});
  REQUIRE(val.u8 == std::vector<uint8_t>{2, 102, 3, 103});
  REQUIRE(val.f32.empty());
}

TEST_CASE("split_validation rejects fractions outside (0, 1) and splits leaving a side empty", "[datasets]") {
  const Dataset d = numbered(3, SampleDtype::f32);
  REQUIRE_THROWS_WITH(split_validation(d, 0.0), Catch::Contains("strictly between 0 and 1, got 0"));
  REQUIRE_THROWS_WITH(split_validation(d, 1.0), Catch::Contains("strictly between 0 and 1"));
  REQUIRE_THROWS_WITH(split_validation(d, 0.9), Catch::Contains("leaves no training samples"));
  REQUIRE_THROWS_WITH(split_validation(d, 1e-18), Catch::Contains("leaves no validation samples"));
  REQUIRE_THROWS_AS(split_validation(numbered(1, SampleDtype::f32), 0.5), DataError);
}
