// The "disc" toy problem: points uniform in the unit square, labelled by whether they fall inside
// the quarter disc of area 1/8 centred at the origin (x^2 + y^2 < 1/(2*pi)), so about 12.5% of
// labels are 1. Deterministic for a seed: the draws (SplitMix64) and labels are exact integer /
// float arithmetic; the standardization uses only +, *, / and sqrt (no other libm calls).
#pragma once

#include <cstdint>

#include "datasets/dataset.h"

namespace trainer {

// n >= 1 samples, f32, sample_shape (2), 2 classes, named "disc". Point i uses draws 2i (x) and
// 2i+1 (y) of SplitMix64(seed), each a 24-bit uniform float in [0, 1). The label is computed on
// the raw point; the stored features are then standardized with the mean and population
// standard deviation taken over all 2n coordinate values together.
Dataset make_disc(int64_t n, uint64_t seed);

}  // namespace trainer
