// Explicit zero padding for convolutions with asymmetric padding (TensorFlow's "same" with an
// even kernel or a stride), which cuDNN descriptors cannot express.
//   x, dx: (B, C, H, W)  xp, dxp: (B, C, H + top + bottom, W + left + right), all of dtype t;
//   channels-last tensors pad the same way with planes = B and inner = C.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "lib/backend/layer_kernel.h"

namespace trainer::cuda {

struct PadGeometry {
  // Methods are constexpr so device code may call them (--expt-relaxed-constexpr).
  int64_t planes = 0;  // B * C (NCHW), or B (NHWC: then `inner` is C)
  int64_t h = 0, w = 0, top = 0, bottom = 0, left = 0, right = 0;
  int64_t inner = 1;  // contiguous values per (h, w) position: 1 (NCHW) or C (NHWC)
  constexpr int64_t ph() const { return h + top + bottom; }
  constexpr int64_t pw() const { return w + left + right; }
};

// xp = x surrounded by zeros.
void launch_pad2d(const PadGeometry& g, DType t, const void* x, void* xp, cudaStream_t stream);
// dx = the interior of dxp (the gradient of launch_pad2d).
void launch_crop2d(const PadGeometry& g, DType t, const void* dxp, void* dx, cudaStream_t stream);

}  // namespace trainer::cuda
