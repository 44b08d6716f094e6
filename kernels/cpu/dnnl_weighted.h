// The kernel shared by dense and conv1d: a weight W and an optional bias b, run by three oneDNN
// primitives (forward, backward-data, backward-weights) on plain-layout memory. The layer's
// factory plans the primitives; this kernel binds the memory and executes them every step.
// W starts the layer's parameter slice; b sits at the next 64-float slot after W
// (param_slot_floats), as Model lays the arena out.
#pragma once

#include <memory>

#include "kernels/cpu/dnnl_context.h"
#include "kernels/layer_kernel.h"

namespace trainer {

struct WeightedPlan {
  dnnl::memory::desc x, y, w, b;  // plain layouts; b is unused without a bias
  bool bias = true;
  dnnl::primitive fwd, bwd_data, bwd_weights;  // bwd_* planned with fwd's primitive_desc as hint
};

std::unique_ptr<LayerKernel> make_dnnl_weighted(const WeightedPlan& p, const KernelContext& ctx);

}  // namespace trainer
