// make_disc and make_random: shapes, statistics, determinism by seed, documented draw order.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>

#include "datasets/disc_generator.h"
#include "datasets/random_generator.h"
#include "lib/core/error.h"
#include "lib/core/rng.h"

using namespace trainer;

namespace {

void mean_std(const std::vector<float>& v, double* mean, double* stddev) {
  double s = 0, sq = 0;
  for (float x : v) s += x;
  *mean = s / double(v.size());
  for (float x : v) sq += (x - *mean) * (x - *mean);
  *stddev = std::sqrt(sq / double(v.size()));
}

}  // namespace

TEST_CASE("make_disc labels about 1/8 of the points 1 and standardizes the features", "[datasets]") {
  const Dataset d = make_disc(1000, 42);
  REQUIRE(d.sample_shape == Shape{2});
  REQUIRE(d.dtype == SampleDtype::f32);
  REQUIRE(d.num_classes == 2);
  REQUIRE(d.size() == 1000);
  REQUIRE(d.f32.size() == 2000);
  const int ones = std::accumulate(d.labels.begin(), d.labels.end(), 0);
  REQUIRE(ones / 1000.0 == Approx(0.125).margin(0.035));  // 3 binomial standard deviations
  double mean = 0, stddev = 0;
  mean_std(d.f32, &mean, &stddev);
  REQUIRE(mean == Approx(0.0).margin(1e-5));
  REQUIRE(stddev == Approx(1.0).epsilon(1e-5));

  const Dataset big = make_disc(200000, 7);
  const int big_ones = std::accumulate(big.labels.begin(), big.labels.end(), 0);
  REQUIRE(big_ones / 200000.0 == Approx(0.125).margin(0.003));
}

TEST_CASE("make_disc draws x then y per point from SplitMix64(seed) and labels the raw point", "[datasets]") {
  const Dataset d = make_disc(500, 3);
  SplitMix64 rng(3);
  int mismatches = 0;
  for (int64_t i = 0; i < d.size(); ++i) {
    const double x = rng.next_float(), y = rng.next_float();
    mismatches += d.labels[i] != (x * x + y * y < 1.0 / (2.0 * 3.14159265358979323846) ? 1 : 0);
  }
  REQUIRE(mismatches == 0);
}

TEST_CASE("make_disc is deterministic for a seed and differs across seeds", "[datasets]") {
  const Dataset a = make_disc(300, 11), b = make_disc(300, 11), c = make_disc(300, 12);
  REQUIRE(a.f32 == b.f32);
  REQUIRE(a.labels == b.labels);
  REQUIRE(a.f32 != c.f32);
  REQUIRE_THROWS_AS(make_disc(0, 1), DataError);
}

TEST_CASE("make_random gives roughly standard normal features and uniform labels", "[datasets]") {
  const Dataset d = make_random(20000, Shape{1, 3, 3}, 4, 9);  // odd numel: Box-Muller pairs span samples
  REQUIRE(d.sample_shape == Shape{1, 3, 3});
  REQUIRE(d.f32.size() == 20000u * 9);
  REQUIRE(d.num_classes == 4);
  double mean = 0, stddev = 0;
  mean_std(d.f32, &mean, &stddev);
  REQUIRE(mean == Approx(0.0).margin(0.02));
  REQUIRE(stddev == Approx(1.0).margin(0.02));
  REQUIRE(std::all_of(d.f32.begin(), d.f32.end(), [](float v) { return std::isfinite(v); }));
  REQUIRE(std::all_of(d.labels.begin(), d.labels.end(), [](int32_t l) { return l >= 0 && l < 4; }));
  std::vector<int> counts(4, 0);
  for (int32_t l : d.labels) ++counts[l];
  for (int c : counts) REQUIRE(c / 20000.0 == Approx(0.25).margin(0.02));
}

TEST_CASE("make_random is deterministic for a seed and validates its arguments", "[datasets]") {
  const Dataset a = make_random(50, Shape{3}, 2, 5), b = make_random(50, Shape{3}, 2, 5);
  REQUIRE(a.f32 == b.f32);
  REQUIRE(a.labels == b.labels);
  REQUIRE(make_random(50, Shape{3}, 2, 6).f32 != a.f32);
  REQUIRE_THROWS_AS(make_random(0, Shape{3}, 2, 1), DataError);
  REQUIRE_THROWS_AS(make_random(5, Shape{0}, 2, 1), DataError);
  REQUIRE_THROWS_AS(make_random(5, Shape{3}, 0, 1), DataError);
}

TEST_CASE("SplitMix64 next_below stays in range and next_float stays in the unit interval", "[datasets]") {
  SplitMix64 rng(1);
  bool in_range = true;
  for (int i = 0; i < 10000; ++i) {
    const float f = rng.next_float();
    in_range = in_range && rng.next_below(7) < 7u && f >= 0.f && f < 1.f;
  }
  REQUIRE(in_range);
  REQUIRE(rng.next_below(1) == 0u);
}
