// exp, sigmoid and tanh for the CPU kernels' element loops, one value (float), four (f4, GCC's
// vector extension: SSE2 on any x86-64) or sixteen at a time (f16: one AVX-512 register in a
// function cloned for AVX-512 with TRAINER_AVX512_CLONES, four SSE registers elsewhere), the same
// operations in all, so a value gets the same bits whichever way it is computed (the CPU kernels
// are compiled with -ffp-contract=off: no multiply-add is fused in one width and not another).
// glibc's vector expf and tanhf (libmvec) are declared only under -ffast-math, and GCC does not
// vectorize a loop around these written for floats (it splits the clamps into branches): libm's
// scalar expf and tanhf took ~27% of a one-thread reuters_lstm step.
//   e^x = 2^n e^r, x = n ln2 + r, |r| <= ln2 / 2: n by rounding with the 1.5 * 2^23 shifter, r
//   with ln2 split in two (Cody and Waite) so that n ln2 is exact enough, e^r - 1 by its Taylor
//   polynomial to r^7 (the rest is below 6e-9 of e^r there), 2^n from the exponent bits. x is
//   clamped to [-87, 88], where e^x and 2^n are normal floats (so e^x saturates at 1.65e38 and
//   e^-inf is 1.6e-38); NaN stays NaN.
//   tanh(x) = m / (m + 2), m = e^(2x) - 1: no cancellation near 0, where m is the polynomial itself.
// Against the exact values (tests/test_vector_math.cc): e^x within 1.2 ulp, e^x - 1 and sigmoid 2.2,
// tanh 2.5 (libm: under 1).
#pragma once

#include <cstdint>
#include <cstring>

#include "lib/core/host_device.h"

namespace trainer::cpu {

using f4 = float __attribute__((vector_size(16)));
using i4 = int32_t __attribute__((vector_size(16)));
using f16 = float __attribute__((vector_size(64)));
using i16 = int32_t __attribute__((vector_size(64)));

// A function whose loops over f16 should run in AVX-512 registers where the CPU has them: GCC
// compiles it twice (baseline x86-64 and AVX-512F) and picks one when the program loads.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define TRAINER_AVX512_CLONES __attribute__((target_clones("default", "avx512f")))
#else
#define TRAINER_AVX512_CLONES
#endif

// T (float, f4 or f16) from p, and back: any alignment.
template <class T>
TRAINER_HD_INLINE T load(const float* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
TRAINER_HD_INLINE void store(float* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

namespace vector_math_detail {
TRAINER_HD_INLINE float clamp(float x, float lo, float hi) {
  x = x < lo ? lo : x;
  return x > hi ? hi : x;
}
template <class V>
TRAINER_HD_INLINE V clamp(V x, float lo, float hi) {  // V: f4 or f16
  x = x < lo ? V{} + lo : x;
  return x > hi ? V{} + hi : x;
}
TRAINER_HD_INLINE float two_to(float n) {  // 2^n for an integral n in [-126, 127]
  const int32_t bits = (int32_t(n) + 127) * (int32_t(1) << 23);
  float s;
  std::memcpy(&s, &bits, sizeof s);
  return s;
}
template <class V>
struct int_vector;  // the int32 vector of V's width
template <>
struct int_vector<f4> {
  using type = i4;
};
template <>
struct int_vector<f16> {
  using type = i16;
};
template <class V>
TRAINER_HD_INLINE V two_to(V n) {
  using I = typename int_vector<V>::type;
  const I bits = (__builtin_convertvector(n, I) + 127) * (int32_t(1) << 23);
  return (V)bits;  // the same bits (a vector cast between vectors of one size)
}
}  // namespace vector_math_detail

// e^x = s (1 + q): s = 2^n, q = e^r - 1. T: float, f4 or f16.
template <class T>
TRAINER_HD_INLINE void exp_split(T x, T& s, T& q) {
  x = vector_math_detail::clamp(x, -87.f, 88.f);
  constexpr float kShifter = 12582912.f;  // 1.5 * 2^23: x log2(e) + it has no fraction bits left
  const T n = (x * 1.44269504088896341f + kShifter) - kShifter;
  const T r = (x - n * 0.693145751953125f) - n * 1.42860682030941723e-6f;
  q = r * (1.f + r * (1.f / 2 +
                      r * (1.f / 6 + r * (1.f / 24 + r * (1.f / 120 + r * (1.f / 720 + r * (1.f / 5040)))))));
  // A NaN x leaves q NaN (and so the result); 2^n then takes n = 0, not a NaN converted to an
  // integer (INT_MIN, whose exponent arithmetic overflows: undefined behaviour, which UBSan caught
  // in the sixteen-wide path). n lies in [-126, 127] otherwise, and NaN compares false.
  s = vector_math_detail::two_to(n > -128.f ? n : T{});
}

template <class T>
TRAINER_HD_INLINE T vexp(T x) {
  T s, q;
  exp_split(x, s, q);
  return s + s * q;
}

template <class T>
TRAINER_HD_INLINE T vexpm1(T x) {
  T s, q;
  exp_split(x, s, q);
  return (s - 1.f) + s * q;
}

template <class T>
TRAINER_HD_INLINE T vsigmoid(T a) {
  return 1.f / (1.f + vexp(-a));
}

template <class T>
TRAINER_HD_INLINE T vtanh(T x) {
  const T m = vexpm1(2.f * x);
  return m / (m + 2.f);
}

// The recurrent cells' activations (lib/core/recurrent_formula.h) with these.
struct VectorActivations {
  template <class T>
  static TRAINER_HD_INLINE T sigmoid(T a) {
    return vsigmoid(a);
  }
  template <class T>
  static TRAINER_HD_INLINE T tanh(T x) {
    return vtanh(x);
  }
};

}  // namespace trainer::cpu
