// make_random: Box-Muller on 24-bit uniforms; u1 is taken in (0, 1] so log(u1) is finite.
#include "datasets/random_generator.h"

#include <cmath>
#include <vector>

#include "lib/core/error.h"
#include "lib/core/rng.h"

namespace trainer {

Dataset make_random(int64_t n, const Shape& sample_shape, int num_classes, uint64_t seed) {
  if (n < 1) throw DataError("random generator: number of samples must be >= 1, got " + std::to_string(n));
  if (sample_shape.rank() == 0 || sample_shape.numel() < 1)
    throw DataError("random generator: sample shape " + sample_shape.str() +
                    " must have positive dimensions");
  if (num_classes < 1)
    throw DataError("random generator: num_classes must be >= 1, got " + std::to_string(num_classes));
  Dataset ds;
  ds.name = "random";
  ds.sample_shape = sample_shape;
  ds.dtype = SampleDtype::f32;
  ds.num_classes = num_classes;
  ds.f32.resize(static_cast<size_t>(n * sample_shape.numel()));
  ds.labels.resize(static_cast<size_t>(n));

  SplitMix64 rng(seed);
  constexpr double kTwoPi = 2.0 * 3.14159265358979323846;
  for (size_t i = 0; i < ds.f32.size(); i += 2) {
    const double u1 = 1.0 - rng.next_float();  // (0, 1]
    const double u2 = rng.next_float();
    const double r = std::sqrt(-2.0 * std::log(u1));
    ds.f32[i] = static_cast<float>(r * std::cos(kTwoPi * u2));
    if (i + 1 < ds.f32.size()) ds.f32[i + 1] = static_cast<float>(r * std::sin(kTwoPi * u2));
  }
  for (int32_t& label : ds.labels)
    label = static_cast<int32_t>(rng.next_below(static_cast<uint64_t>(num_classes)));
  return ds;
}

Dataset make_random_values(int64_t n, const Shape& sample_shape, int64_t width, bool binary, uint64_t seed) {
  if (width < 1)
    throw DataError("random generator: the targets' width must be >= 1, got " + std::to_string(width));
  Dataset ds = make_random(n, sample_shape, 1, seed);
  const int64_t F = sample_shape.numel();
  SplitMix64 rng(mix64(seed) ^ 0x5EEDull);
  auto normal = [&] {
    const double u1 = 1.0 - rng.next_float(), u2 = rng.next_float();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
  };
  std::vector<double> w(size_t(width * F));
  for (double& v : w) v = normal() / std::sqrt(double(F));
  ds.labels.clear();
  ds.target_width = width;
  ds.targets.resize(size_t(n * width));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < width; ++k) {
      double v = 0;
      for (int64_t j = 0; j < F; ++j) v += w[size_t(k * F + j)] * double(ds.f32[size_t(i * F + j)]);
      v += 0.1 * normal();
      ds.targets[size_t(i * width + k)] = binary ? (v > 0 ? 1.f : 0.f) : float(v);
    }
  return ds;
}

}  // namespace trainer
