// OptimizerKernel: a backend's implementation of one optimizer's update over the flat parameter
// arena (lib/optim registers which optimizers exist and their keys; kernels/cpu and kernels/cuda
// register a step per optimizer and backend, as layers' kernels are: optimizer_steps.{cc,cu}).
// Made once when the executor plans, with the arena's tensors: whatever memory it needs is taken
// then (scratch_bytes, bind), never inside a step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "lib/backend/layer_kernel.h"
#include "lib/backend/step_kernels.h"
#include "lib/core/optimizer_formulas.h"

namespace trainer {

class Backend;

// One parameter tensor inside the arena, in floats.
struct ParamRange {
  int64_t offset = 0, size = 0;
};

struct OptimizerSpec {
  Backend* backend = nullptr;
  OptimizerHyper hyper;  // the section's validated values, every declared key present
  int64_t n = 0;         // floats of the arena (padding between tensors included)
  // The parameter tensors in the arena, in order: per-tensor rules (LAMB's trust ratio) reduce
  // over each; empty: one tensor [0, n).
  std::vector<ParamRange> tensors;
};

class OptimizerKernel {
 public:
  virtual ~OptimizerKernel() = default;
  // Backend memory the kernel needs between launches (per-tensor partial sums), which the
  // executor takes before the first step and hands to bind(); 0: none.
  virtual size_t scratch_bytes() const { return 0; }
  virtual void bind(void* scratch) { (void)scratch; }
  // One update of the arena: w, g: n floats; state[k]: slot k's arena (laid out like w), for the
  // slots the optimizer keeps (state may be null when it keeps none); s: the step's scalars in
  // backend memory. Updates nothing when s->nonfinite & kNonfiniteSkipsUpdate (on the device,
  // so a captured step replays it), and ORs kNonfiniteWeights into s->nonfinite when a weight is
  // not finite afterwards, skipped or not.
  virtual void step(float* w, const float* g, float* const* state, StepScalars* s) = 0;
  // Passes over the whole arena the step can take over, offered once after bind(); each returns
  // whether the step does it (then the executor leaves the pass out):
  //   fuse_grad_scale: every gradient read is multiplied by record->last_scale (backend memory:
  //     gradient clipping's factor, which then need not scale the arena itself)
  //   fuse_low_precision_copy: each updated weight is also written, rounded to t, at the same
  //     index of `low` (the 16-bit copy the layers' products read; ExecutorOptions::
  //     low_precision_params), except inside `filters`, whose copies are laid out (K, R, S, C)
  virtual bool fuse_grad_scale(const ClipRecord* record) {
    (void)record;
    return false;
  }
  virtual bool fuse_low_precision_copy(void* low, DType t, const std::vector<LowFilterLayout>& filters) {
    (void)low;
    (void)t;
    (void)filters;
    return false;
  }
};

using OptimizerKernelFactory = std::function<std::unique_ptr<OptimizerKernel>(const OptimizerSpec&)>;

// The chunks of a per-tensor reduction: each tensor cut into pieces of at most `chunk` floats, in
// order. Both backends sum each chunk, then each tensor's chunks in order, so the result does not
// depend on the thread count.
struct TensorChunk {
  int64_t begin = 0, end = 0;  // floats of the arena
  int32_t first = 0;           // the tensor's first chunk
  int32_t count = 0;           // the tensor's chunks
};
inline std::vector<TensorChunk> tensor_chunks(const OptimizerSpec& spec, int64_t chunk) {
  std::vector<ParamRange> tensors = spec.tensors;
  if (tensors.empty()) tensors.push_back({0, spec.n});
  std::vector<TensorChunk> out;
  for (const ParamRange& t : tensors) {
    const int32_t first = int32_t(out.size());
    for (int64_t b = t.offset; b < t.offset + t.size; b += chunk)
      out.push_back({b, std::min(b + chunk, t.offset + t.size), first, 0});
    for (size_t k = size_t(first); k < out.size(); ++k) out[k].count = int32_t(out.size()) - first;
  }
  return out;
}

}  // namespace trainer
