// Every optimizer's step on the CPU: a template over the rules of lib/core/optimizer_formulas.h
// (the same formulas the CUDA steps run, rounded once per operation, so the bits agree) and one
// registration line per optimizer: one pass over the arena, update() per parameter. It skips the update when
// the step is flagged non-finite, then check the weights.
#include <memory>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_ops.h"
#include "lib/backend/backend.h"
#include "lib/optim/optimizer.h"

namespace trainer {
namespace {

OptimizerState state_of(float* const* state, int slots) {
  OptimizerState st;
  for (int k = 0; k < slots; ++k) st.p[k] = state[k];
  return st;
}

template <class Rule>
class ElementwiseStep : public OptimizerKernel {
 public:
  explicit ElementwiseStep(const OptimizerSpec& spec)
      : rule_(spec.hyper), n_(spec.n), slots_(rule_.slots()) {}
  void step(float* w, const float* g, float* const* state, StepScalars* s) override {
    if (!(s->nonfinite & kNonfiniteSkipsUpdate)) {
      const typename Rule::Coeffs c = rule_.coeffs(s->lr, s->step, s->optim);
      const OptimizerState st = state_of(state, slots_);
      const int64_t n = n_;
#pragma omp parallel for simd if (n > 65536)
      for (int64_t i = 0; i < n; ++i) Rule::update(c, w[i], g[i], st, i);
    }
    cpu::check_finite(w, n_, kNonfiniteWeights, *s);
  }

 private:
  Rule rule_;
  int64_t n_;
  int slots_;
};

template <class Rule>
void add(OptimizerRegistry& r) {
  r.add_kernel(Rule::kName, "cpu", [](const OptimizerSpec& spec) -> std::unique_ptr<OptimizerKernel> {
    return std::make_unique<ElementwiseStep<Rule>>(spec);
  });
}

}  // namespace

void register_cpu_optimizers(OptimizerRegistry& r) {
  add<SgdRule>(r);
  add<AdamRule>(r);
  add<AdamWRule>(r);
  add<NadamRule>(r);
  add<RmspropRule>(r);
  add<LionRule>(r);
}

}  // namespace trainer
