// Element types of activations in the hand-written kernels (only included from .cu files):
// kernels load any of float, bf16 and fp16 as float, compute in float, and store rounding to
// nearest even. with_dtype() turns a runtime DType into the C++ type a kernel template takes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "lib/backend/layer_kernel.h"

namespace trainer::cuda {

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }

template <class T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) {
  return __float2half_rn(v);
}

// Calls f(T()) with T the element type of dtype t: float, __nv_bfloat16 or __half.
template <class F>
void with_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32:
      f(float());
      return;
    case DType::bf16:
      f(__nv_bfloat16());
      return;
    case DType::f16:
      f(__half());
      return;
  }
}

}  // namespace trainer::cuda
