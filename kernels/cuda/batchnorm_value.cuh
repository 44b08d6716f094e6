// The batchnorm's normalized value as its forward stores it, shared by every kernel that computes
// it: the batchnorm's own passes (batchnorm.cu) and a pooling that applies the batchnorm before it
// as it reads (pool2d.cu, NormalizeHandoff), so that both give the same bits.
#pragma once

#include "kernels/cuda/element_type.cuh"

namespace trainer::cuda {

// (x - mean) scale + shift (scale = gamma inv, shift = beta), one rounding of the fused
// multiply-add, then to T. Written out as one intrinsic so that every kernel computing it (both
// forwards, and the backward passes that recompute a fused relu's mask from x) gets the same bits.
template <class T>
__device__ __forceinline__ T bn_value(float x, float mean, float scale, float shift) {
  return from_f32<T>(__fmaf_rn(x - mean, scale, shift));
}

}  // namespace trainer::cuda
