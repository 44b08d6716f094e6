// One oneDNN pooling kernel for any spatial rank, planned from the geometry: maxpool/avgpool 1-D
// and 2-D, and global_avg_pool (a window covering all of the spatial dims). Max pooling's
// workspace (the argmax indices) lives in the kernel's arena slice between forward and backward.
#pragma once

#include <memory>

#include "kernels/cpu/dnnl_context.h"
#include "lib/backend/layer_kernel.h"

namespace trainer {

struct PoolGeometry {
  dnnl::memory::dims x, y, kernel, strides, pad_l, pad_r;  // x, y with batch and channels
  dnnl::algorithm algo;
};

// pooling_max, or pooling_avg_exclude_padding (the average over the window's in-bounds inputs).
inline dnnl::algorithm pooling_algorithm(bool max) {
  return max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding;
}

std::unique_ptr<LayerKernel> make_dnnl_pooling(const PoolGeometry& g, const KernelContext& ctx);

}  // namespace trainer
