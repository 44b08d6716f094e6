// Explicit zero padding for convolutions with asymmetric padding (TensorFlow's "same" with an
// even kernel or a stride), which cuDNN descriptors cannot express.
//   x, dx: (B, C, H, W)  xp, dxp: (B, C, H + top + bottom, W + left + right)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace trainer::cuda {

struct PadGeometry {
  // Methods are constexpr so device code may call them (--expt-relaxed-constexpr).
  int64_t planes = 0;  // B * C
  int64_t h = 0, w = 0, top = 0, bottom = 0, left = 0, right = 0;
  constexpr int64_t ph() const { return h + top + bottom; }
  constexpr int64_t pw() const { return w + left + right; }
};

// xp = x surrounded by zeros.
void launch_pad2d(const PadGeometry& g, const float* x, float* xp, cudaStream_t stream);
// dx = the interior of dxp (the gradient of launch_pad2d).
void launch_crop2d(const PadGeometry& g, const float* dxp, float* dx, cudaStream_t stream);

}  // namespace trainer::cuda
