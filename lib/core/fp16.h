// IEEE binary16 on the host, rounded to nearest even as CUDA's __float2half_rn: subnormals kept,
// values past 65504 (after rounding) become infinities, NaN stays a (quiet) NaN. For tests that
// feed or read fp16 tensors.
#pragma once

#include <cstdint>
#include <cstring>

namespace trainer {

inline uint16_t f16_from_float(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to >= 65520: infinity
  if (a < 0x38800000u) {                                  // below 2^-14: a subnormal (or zero)
    // a * 2^24 as an integer, rounded to nearest even: the subnormal's bits.
    const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
    const int shift = 126 - int(a >> 23);  // value / 2^-24 = mant * 2^(exponent - 126)
    if (shift > 24 + 1) return uint16_t(sign);
    const uint32_t keep = mant >> shift, rest = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    return uint16_t(sign | (keep + ((rest > half || (rest == half && (keep & 1u))) ? 1u : 0u)));
  }
  // Normal: rebias the exponent (127 -> 15) and round the 23-bit mantissa to 10 bits.
  const uint32_t r = a - 0x38000000u;
  return uint16_t(sign | ((r + 0xfffu + ((r >> 13) & 1u)) >> 13));
}

inline float float_from_f16(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t u;
  if (e == 0x1f) {
    u = sign | 0x7f800000u | (m << 13);
  } else if (e != 0) {
    u = sign | ((e + 112u) << 23) | (m << 13);
  } else {  // zero or subnormal: m * 2^-24, exact in fp32
    float f = float(m) * (1.f / 16777216.f);
    std::memcpy(&u, &f, 4);
    u |= sign;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// x rounded to fp16 and back.
inline float round_to_f16(float x) { return float_from_f16(f16_from_float(x)); }

}  // namespace trainer
