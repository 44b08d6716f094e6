// LayerKernel: how one layer runs on one backend for one batch size.
//
// Kernels are created once per (layer, batch size) before training: that is where oneDNN
// primitives, cuDNN descriptors and algorithm choices are made. The step itself only executes.
// Lifecycle:
//   create (plans, no memory) -> workspace_bytes() -> bind(params, grads, workspace) -> forward/backward...
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "lib/core/shape.h"

namespace trainer {

class Backend;
class Layer;

// Per-step scalars that live in backend memory, so a captured step (CUDA graph) can replay with
// new values: the host (or a device kernel) updates them before each step.
struct StepScalars {
  float lr = 0.f;
  float bias_correction1 = 1.f;  // 1 - beta1^t (Adam family)
  float bias_correction2 = 1.f;  // 1 - beta2^t
  float momentum_product = 1.f;  // Nadam's running product of mu_t
  float mu_t = 0.f;              // Nadam's mu at t
  float mu_next = 0.f;           // Nadam's mu at t+1
  uint64_t step = 0;             // global step counter, 0-based; seeds dropout masks
  uint64_t seed = 0;
  // Written on the device during a training step (the non-finite guard, lib/backend/backend.h); the
  // host's copy of these scalars before each step resets them to zero.
  uint32_t nonfinite = 0;  // NonfiniteBits found so far in this step
  float batch_loss = 0.f;  // this step's summed loss, added to the epoch's sum if finite
};

enum class MathMode { strict_fp32, tf32 };

// How a tensor between two layers is laid out when it is not plain row-major (oneDNN's blocked
// nChw16c...). Opaque to lib: only the backend that made it looks inside (the CPU backend's
// DnnlLayout, kernels/cpu/dnnl_edge.h, holds a dnnl::memory::desc). A kernel makes its output's
// layout once, when it is created; the next kernel may keep the handle.
struct Layout {
  virtual ~Layout() = default;
};

struct KernelContext {
  Backend* backend = nullptr;
  int64_t batch = 0;
  const StepScalars* scalars = nullptr;  // backend memory
  int layer_index = 0;                   // distinguishes dropout streams
  MathMode math = MathMode::strict_fp32;
  bool deterministic = false;
  // Layouts between layers. input_layout: the layout the previous computing layer chose for
  // this layer's input (and for the gradient of that input); null = plain row-major.
  // output_layout_free: the consumer of this layer's output accepts any layout, so the kernel
  // may keep its preferred one (and report it through output_layout()); false = the output and
  // its gradient must be plain.
  std::shared_ptr<const Layout> input_layout;
  bool output_layout_free = false;
};

class LayerKernel {
 public:
  virtual ~LayerKernel() = default;
  // Bytes of backend memory this kernel keeps between forward and backward (pooling indices,
  // dropout masks) plus library scratch (cuDNN workspace). Aligned slices of one arena.
  virtual size_t workspace_bytes() const { return 0; }
  // The layout of y and dy when not plain (see KernelContext::output_layout_free); null = plain.
  virtual std::shared_ptr<const Layout> output_layout() const { return nullptr; }
  // Bytes of y (and of dy) in that layout (blocked layouts may pad channels); 0 = plain size,
  // batch * output numel floats.
  virtual size_t output_bytes() const { return 0; }
  // params/grads: this layer's slices of the parameter and gradient arenas (null if none);
  // buffers: its non-trainable state (running statistics).
  virtual void bind(float* params, float* grads, float* buffers, void* workspace) {}
  // x: (batch, in_shape...), y: (batch, out_shape...).
  virtual void forward(const float* x, float* y, bool training) = 0;
  // Overwrites (never accumulates) parameter gradients. dx may be null (first layer).
  virtual void backward(const float* x, const float* y, const float* dy, float* dx) = 0;
};

}  // namespace trainer
