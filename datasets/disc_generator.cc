// make_disc: generate, label, then standardize in place (statistics accumulated in double).
#include "datasets/disc_generator.h"

#include <cmath>

#include "lib/core/error.h"
#include "lib/core/rng.h"

namespace trainer {

Dataset make_disc(int64_t n, uint64_t seed) {
  if (n < 1) throw DataError("disc generator: number of samples must be >= 1, got " + std::to_string(n));
  const double r2 = 1.0 / (2.0 * 3.14159265358979323846);  // pi * r2 / 4 = 1/8 of the square
  Dataset ds;
  ds.name = "disc";
  ds.sample_shape = Shape{2};
  ds.dtype = SampleDtype::f32;
  ds.num_classes = 2;
  ds.f32.resize(static_cast<size_t>(2 * n));
  ds.labels.resize(static_cast<size_t>(n));

  SplitMix64 rng(seed);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float x = rng.next_float();
    const float y = rng.next_float();
    ds.f32[2 * i] = x;
    ds.f32[2 * i + 1] = y;
    ds.labels[i] = double(x) * x + double(y) * y < r2 ? 1 : 0;
    sum += double(x) + y;
  }
  const double mean = sum / double(2 * n);
  double sq = 0;
  for (float v : ds.f32) sq += (v - mean) * (v - mean);
  const double stddev = std::sqrt(sq / double(2 * n));
  const double inv = stddev > 0 ? 1.0 / stddev : 1.0;  // all values equal only for tiny n
  for (float& v : ds.f32) v = static_cast<float>((v - mean) * inv);
  return ds;
}

}  // namespace trainer
