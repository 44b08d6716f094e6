// One oneDNN convolution kernel for any spatial rank, planned from the geometry: conv1d
// (x: (B, C, L), W: (F, C, k)) and conv2d (x: (B, C, H, W), W: (F, C, kh, kw)). W and the bias
// b: (F) are the layer's parameter views 0 and 1.
#pragma once

#include <memory>

#include "kernels/cpu/dnnl_context.h"
#include "lib/backend/layer_kernel.h"

namespace trainer {

struct ConvGeometry {
  dnnl::memory::dims x, y, w;  // x, y with batch and channels; w: (F, C, k...)
  dnnl::memory::dims strides, pad_l, pad_r;
  bool bias = true;
  int64_t groups =
      1;  // > 1: w is (F, C/groups, k...), planned as oneDNN's (groups, F/groups, C/groups, k...)
};

std::unique_ptr<LayerKernel> make_dnnl_conv(const ConvGeometry& g, const KernelContext& ctx);

}  // namespace trainer
