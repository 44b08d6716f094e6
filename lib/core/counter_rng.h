// Counter-based random numbers: a pure function of (seed, stream, counter), identical on the host
// and in CUDA kernels. Used for dropout masks, so masks need no device RNG state and a step can be
// replayed (CUDA graphs) or resumed exactly.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define TRAINER_HD __host__ __device__ __forceinline__
#else
#define TRAINER_HD inline
#endif

namespace trainer {

TRAINER_HD uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, 1) with 24 bits, from (seed, stream, counter).
TRAINER_HD float counter_uniform(uint64_t seed, uint64_t stream, uint64_t counter) {
  uint64_t h = splitmix64(seed ^ splitmix64(stream ^ splitmix64(counter)));
  return float(h >> 40) * (1.0f / 16777216.0f);
}

// The dropout stream of one layer at one step.
TRAINER_HD uint64_t dropout_stream(uint64_t step, int layer_index) {
  return (step << 16) ^ uint64_t(layer_index) ^ 0xD50F0u;
}

// A small sequential generator for host-side work (init, shuffles): splitmix64 over a counter.
struct SplitMix {
  uint64_t state;
  explicit SplitMix(uint64_t seed) : state(seed) {}
  uint64_t next() { return splitmix64(state++); }
  // Uniform in [0, 1) with 53 bits.
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
};

}  // namespace trainer
