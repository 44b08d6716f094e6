// Counter-based random numbers: a pure function of (seed, stream, counter), identical on the host
// and in CUDA kernels. Used for dropout masks (lib/core/dropout_formula.h), so masks need no device
// RNG state and a step can be replayed (CUDA graphs) or resumed exactly.
#pragma once

#include <cstdint>

#include "lib/core/host_device.h"
#include "lib/core/rng.h"  // splitmix64

namespace trainer {

// Uniform in [0, 1) with 24 bits, from (seed, stream, counter).
TRAINER_HD float counter_uniform(uint64_t seed, uint64_t stream, uint64_t counter) {
  uint64_t h = splitmix64(seed ^ splitmix64(stream ^ splitmix64(counter)));
  return float(h >> 40) * (1.0f / 16777216.0f);
}

// The dropout stream of one layer at one step.
TRAINER_HD uint64_t dropout_stream(uint64_t step, int layer_index) {
  return (step << 16) ^ uint64_t(layer_index) ^ 0xD50F0u;
}

}  // namespace trainer
