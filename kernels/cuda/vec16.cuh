// 16 bytes of a row of f32, bf16 or fp16 moved as one uint4 and widened to floats (and back),
// for the memory-bound kernels that read rows 16 bytes at a time (token_loss.cu, layer_norm.cu,
// the element-wise maps of map16.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace trainer::cuda {

// Whether p may be read and written 16 bytes at a time.
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// 16 bytes of a row: kVec<T> elements (8 bf16 or fp16, 4 floats).
template <class T>
constexpr int kVec = 16 / int(sizeof(T));

__device__ __forceinline__ float bits_f32(__nv_bfloat16, uint16_t b) {
  return __bfloat162float(__ushort_as_bfloat16(b));
}
__device__ __forceinline__ float bits_f32(__half, uint16_t b) { return __half2float(__ushort_as_half(b)); }
__device__ __forceinline__ uint32_t pair_bits(__nv_bfloat16, float a, float b) {
  const __nv_bfloat162 p = __floats2bfloat162_rn(a, b);
  return uint32_t(__bfloat16_as_ushort(p.x)) | uint32_t(__bfloat16_as_ushort(p.y)) << 16;
}
__device__ __forceinline__ uint32_t pair_bits(__half, float a, float b) {
  const __half2 p = __floats2half2_rn(a, b);
  return uint32_t(__half_as_ushort(p.x)) | uint32_t(__half_as_ushort(p.y)) << 16;
}

// 16 bytes as kVec<T> floats, the lower address first, and back (rounding to nearest even, as
// from_f32 does).
template <class T>
__device__ __forceinline__ void unpack(uint4 u, float (&x)[kVec<T>]) {
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (kVec<T> == 4) {
      x[i] = __uint_as_float(w[i]);
    } else {
      x[2 * i] = bits_f32(T(), uint16_t(w[i] & 0xffffu));
      x[2 * i + 1] = bits_f32(T(), uint16_t(w[i] >> 16));
    }
  }
}
template <class T>
__device__ __forceinline__ uint4 pack(const float (&x)[kVec<T>]) {
  uint32_t w[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (kVec<T> == 4)
      w[i] = __float_as_uint(x[i]);
    else
      w[i] = pair_bits(T(), x[2 * i], x[2 * i + 1]);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

}  // namespace trainer::cuda
