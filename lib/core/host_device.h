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
