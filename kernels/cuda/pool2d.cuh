// Max and average pooling kernels on the GPU with any (also asymmetric) padding.
//   x, dx: (B, C, H, W)  y, dy: (B, C, OH, OW), all of dtype t  argmax: (B, C, OH, OW) int32,
//   index h*W + w
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "lib/backend/layer_kernel.h"

namespace trainer::cuda {

struct PoolGeometry {
  int64_t batch = 0, channels = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, pad_top = 0, pad_left = 0;
  bool max = true;  // else average over the window's in-bounds elements (padding excluded)
  // x, y and their gradients stored channels-last (B, H, W, C) and (B, OH, OW, C); argmax is then
  // laid out like y and still holds h*W + w.
  bool channels_last = false;
  // A relu runs inside (KernelContext::fused_relu): the forward stores z = relu(pooled), and the
  // backward takes dz where z > 0 (0 * dz elsewhere, the relu kernels' rule) from the stored z.
  bool relu = false;
};

// Max pooling records the first maximal position of each window in `argmax` (as oneDNN does).
void launch_pool2d_forward(const PoolGeometry& g, DType t, const void* x, void* y, int32_t* argmax,
                           cudaStream_t stream);
// Overwrites dx; every input gathers from the windows that contain it (no atomics). z: the
// forward's output, read with g.relu only.
void launch_pool2d_backward(const PoolGeometry& g, DType t, const void* dy, const void* z,
                            const int32_t* argmax, void* dx, cudaStream_t stream);

}  // namespace trainer::cuda
