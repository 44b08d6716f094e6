// Every optimizer's step on the GPU: a kernel template over the rules of
// lib/core/optimizer_formulas.h (the formulas the CPU steps run, explicitly rounded, so the bits
// agree) and one registration line per optimizer: one grid-stride pass, update() per parameter,
// the weight check fused. Per-step values (learning rate, bias corrections, the non-finite flags)
// are read from device memory, so a captured step replays.
#include <memory>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/nonfinite_guard.cuh"
#include "lib/optim/optimizer.h"

namespace trainer {
namespace {

template <class Rule>
__global__ void elementwise_kernel(Rule rule, float* w, const float* g, OptimizerState st, int64_t n,
                                   StepScalars* s) {
  const bool skip = (s->nonfinite & kNonfiniteSkipsUpdate) != 0;  // non-finite loss or gradient: no update
  const typename Rule::Coeffs c = rule.coeffs(s->lr, s->step, s->optim);
  bool bad = false;
  for (int64_t i = cuda::global_index(); i < n; i += cuda::grid_stride()) {
    if (!skip) Rule::update(c, w[i], g[i], st, i);
    bad |= nonfinite_bits(w[i]);
  }
  cuda::flag_nonfinite_weights(bad, s);
}

OptimizerState state_of(float* const* state, int slots) {
  OptimizerState st;
  for (int k = 0; k < slots; ++k) st.p[k] = state[k];
  return st;
}

template <class Rule>
class ElementwiseStep : public OptimizerKernel {
 public:
  explicit ElementwiseStep(const OptimizerSpec& spec)
      : rule_(spec.hyper), n_(spec.n), slots_(rule_.slots()), be_(static_cast<CudaBackend&>(*spec.backend)) {}
  void step(float* w, const float* g, float* const* state, StepScalars* s) override {
    if (n_ <= 0) return;
    elementwise_kernel<Rule><<<cuda::grid_for(n_), cuda::kThreads, 0, be_.stream()>>>(
        rule_, w, g, state_of(state, slots_), n_, s);
    CUDA_CHECK_LAUNCH();
  }

 private:
  Rule rule_;
  int64_t n_;
  int slots_;
  CudaBackend& be_;
};

template <class Rule>
void add(OptimizerRegistry& r) {
  r.add_kernel(Rule::kName, "cuda", [](const OptimizerSpec& spec) -> std::unique_ptr<OptimizerKernel> {
    return std::make_unique<ElementwiseStep<Rule>>(spec);
  });
}

}  // namespace

void register_cuda_optimizers(OptimizerRegistry& r) {
  add<SgdRule>(r);
  add<AdamRule>(r);
  add<AdamWRule>(r);
  add<NadamRule>(r);
  add<RmspropRule>(r);
  add<LionRule>(r);
}

}  // namespace trainer
