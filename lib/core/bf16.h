// bfloat16 on the host: the top 16 bits of an IEEE fp32, rounded to nearest even (as CUDA's
// __float2bfloat16 and oneDNN round). NaN stays a (quiet) NaN. For the CPU's conversions and for
// tests that feed or read low-precision tensors.
#pragma once

#include <cstdint>
#include <cstring>

namespace trainer {

inline uint16_t bf16_from_float(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // NaN: keep it quiet
  u += 0x7fffu + ((u >> 16) & 1u);                                          // round to nearest even
  return uint16_t(u >> 16);
}

inline float float_from_bf16(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// x rounded to bf16 and back.
inline float round_to_bf16(float x) { return float_from_bf16(bf16_from_float(x)); }

}  // namespace trainer
