// Code callable on the host and in CUDA kernels: TRAINER_HD, and float arithmetic rounded once per
// operation (never contracted into a fused multiply-add), so a formula written once gives the same
// bits on the CPU and the GPU. In a CUDA kernel the ops are nvcc's explicitly rounded intrinsics
// (__fmul_rn...), which nvcc never fuses; on the host they are plain float operators (the CPU build
// enables no FMA instructions, so nothing is fused there either).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TRAINER_HD __host__ __device__ __forceinline__
#else
#define TRAINER_HD inline
#endif

// TRAINER_HD, always inlined on the host too: functions that take or return GCC vectors of 64
// bytes (the CPU kernels' f16) from inside functions cloned for AVX-512 (TRAINER_AVX512_CLONES).
// A call left between a clone and a baseline-compiled function passes such a vector in a zmm
// register on one side and in memory on the other (GCC's -Wpsabi note): at -O1 (the sanitizer
// build) the LSTM's cells then computed garbage.
#if defined(__CUDACC__)
#define TRAINER_HD_INLINE __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define TRAINER_HD_INLINE inline __attribute__((always_inline))
#else
#define TRAINER_HD_INLINE inline
#endif

namespace trainer {

#if defined(__CUDA_ARCH__)
TRAINER_HD float add_rn(float a, float b) { return __fadd_rn(a, b); }
TRAINER_HD float sub_rn(float a, float b) { return __fsub_rn(a, b); }
TRAINER_HD float mul_rn(float a, float b) { return __fmul_rn(a, b); }
TRAINER_HD float div_rn(float a, float b) { return __fdiv_rn(a, b); }
TRAINER_HD float sqrt_rn(float a) { return __fsqrt_rn(a); }
#else
TRAINER_HD float add_rn(float a, float b) { return a + b; }
TRAINER_HD float sub_rn(float a, float b) { return a - b; }
TRAINER_HD float mul_rn(float a, float b) { return a * b; }
TRAINER_HD float div_rn(float a, float b) { return a / b; }
TRAINER_HD float sqrt_rn(float a) { return std::sqrt(a); }
#endif

// NaN or infinite: the exponent bits all ones. Tested on the bits, so that no fast-math flag can
// fold the test away (the non-finite guard and loss scaling's overflow check, on both backends).
TRAINER_HD bool nonfinite_bits(float x) {
#if defined(__CUDA_ARCH__)
  const uint32_t u = __float_as_uint(x);
#else
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
#endif
  return (u & 0x7f800000u) == 0x7f800000u;
}

}  // namespace trainer
