// SplitMix64: the one random generator used by the dataset generators and the batch loader.
// std:: distributions are implementation-defined, so every draw here is spelled out bit by bit:
// the same seed gives the same data, shuffles and splits on every compiler and platform.
#pragma once

#include <cstdint>

namespace trainer {

// The SplitMix64 output function: a bijective 64-bit mixer, also used to derive sub-seeds.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next_u64() {
    state_ += 0x9E3779B97F4A7C15ull;
    return mix64(state_);
  }

  // Uniform in [0, 1) on a 2^-24 grid: the top 24 bits, so every value is exact in float.
  float next_float() { return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f); }

  // Uniform in [0, n), n >= 1, without modulo bias (rejects the top partial range).
  uint64_t next_below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    uint64_t r = next_u64();
    while (r < threshold) r = next_u64();
    return r % n;
  }

 private:
  uint64_t state_;
};

}  // namespace trainer
