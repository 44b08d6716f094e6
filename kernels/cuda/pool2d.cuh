// Max and average pooling kernels on the GPU with any (also asymmetric) padding.
//   x, dx: (B, C, H, W)  y, dy: (B, C, OH, OW), all of dtype t  argmax: (B, C, OH, OW), laid out like
//   y (pool2d_argmax_bytes)
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
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

// A batchnorm applied to x as it is read (NormalizeHandoff): each value becomes the batchnorm's
// stored output, bn_value(x) through its fused relu, before it is compared or summed.
struct PoolNormalize {
  const float *mean = nullptr, *inv = nullptr, *gamma = nullptr, *beta = nullptr;  // (C) f32
  bool relu = false;
};

// Bytes of max pooling's argmax: where the windows tile the input (stride = kernel, no padding,
// the usual 2x2 pool) and hold at most 256 values, each maximum's place in its window (row a kw +
// column b) as a byte; otherwise its index h W + w as an int32.
size_t pool2d_argmax_bytes(const PoolGeometry& g);
// Max pooling records the first maximal position of each window in `argmax` (as oneDNN does).
void launch_pool2d_forward(const PoolGeometry& g, DType t, const void* x, void* y, void* argmax,
                           cudaStream_t stream);
// Whether launch_pool2d_forward_normalized runs this pooling with these pointers: windows that tile
// the input (stride = kernel, no padding), channels-last by packs.
bool pool2d_normalizes(const PoolGeometry& g, DType t, const void* x, const void* y, const void* argmax);
// The same pooling of the batchnorm's output bn(x), computed from its input x on the fly: the same
// y and argmax as the batchnorm's normalize pass followed by launch_pool2d_forward.
void launch_pool2d_forward_normalized(const PoolGeometry& g, DType t, const void* x, const PoolNormalize& bn,
                                      void* y, void* argmax, cudaStream_t stream);
// Overwrites dx; every input gathers from the windows that contain it (no atomics). z: the
// forward's output, read with g.relu only.
void launch_pool2d_backward(const PoolGeometry& g, DType t, const void* dy, const void* z, const void* argmax,
                            void* dx, cudaStream_t stream);

}  // namespace trainer::cuda
