// Random data for benchmarks and smoke tests: features roughly standard normal, labels uniform.
// Deterministic for a seed (SplitMix64 draws; Box-Muller uses std::log/sqrt/cos/sin, so the
// last bits may differ between C libraries, which does not matter for timing runs).
#pragma once

#include <cstdint>

#include "datasets/dataset.h"
#include "lib/core/shape.h"

namespace trainer {

// n >= 1 samples of sample_shape (numel >= 1), f32, num_classes >= 1, named "random".
// All n * numel features are drawn first (Box-Muller, two normals per pair of uniforms), then
// the n labels (uniform in [0, num_classes), unbiased).
Dataset make_random(int64_t n, const Shape& sample_shape, int num_classes, uint64_t seed);

// The same normal features with `width` float targets a sample that a model can learn: a fixed
// random linear map of the features (weights drawn from the seed, scaled by 1/sqrt(features)),
// plus normal noise of 0.1; binary: 1 where that value is positive, else 0.
Dataset make_random_values(int64_t n, const Shape& sample_shape, int64_t width, bool binary, uint64_t seed);

}  // namespace trainer
