// SplitMix64: the one random generator (dataset generators, the batch loader's shuffles, model
// initialization) and its mixer, which the counter-based draws of lib/core/counter_rng.h share.
// std:: distributions are implementation-defined, so every draw here is spelled out bit by bit:
// the same seed gives the same data, shuffles, splits and initial weights on every compiler and
// platform.
#pragma once

#include <cstdint>

#include "lib/core/host_device.h"

namespace trainer {

constexpr uint64_t kSplitMixGamma = 0x9E3779B97F4A7C15ull;  // the golden-ratio increment

// The SplitMix64 output function: a bijective 64-bit mixer, also used to derive sub-seeds.
TRAINER_HD uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// One SplitMix64 step from state x: mix64(x + gamma). A pure function, so it also serves as a
// counter-based hash (counter_rng.h).
TRAINER_HD uint64_t splitmix64(uint64_t x) { return mix64(x + kSplitMixGamma); }

// mix64 over a Weyl sequence state_k = state_0 + k * increment. SplitMix64(seed) is the standard
// generator (increment gamma: draws mix64(seed + k*gamma), k = 1, 2, ...); SplitMix64::counter(seed)
// hashes consecutive counters instead (draws splitmix64(seed + k), k = 0, 1, ...), the form that
// counter_uniform() uses; model initialization draws from it.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed), increment_(kSplitMixGamma) {}
  static SplitMix64 counter(uint64_t seed) { return SplitMix64(seed + kSplitMixGamma - 1, 1); }

  uint64_t next_u64() {
    state_ += increment_;
    return mix64(state_);
  }

  // Uniform in [0, 1) on a 2^-24 grid: the top 24 bits, so every value is exact in float.
  float next_float() { return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f); }
  // Uniform in [0, 1) on a 2^-53 grid: the top 53 bits, exact in double.
  double uniform() { return double(next_u64() >> 11) * (1.0 / 9007199254740992.0); }

  // As if next_u64() had run n times (the state is a Weyl sequence): lets threads draw disjoint
  // stretches of one stream.
  void skip(uint64_t n) { state_ += n * increment_; }

  // Uniform in [0, n), n >= 1, without modulo bias (rejects the top partial range).
  uint64_t next_below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    uint64_t r = next_u64();
    while (r < threshold) r = next_u64();
    return r % n;
  }

 private:
  SplitMix64(uint64_t state, uint64_t increment) : state_(state), increment_(increment) {}
  uint64_t state_, increment_;
};

}  // namespace trainer
