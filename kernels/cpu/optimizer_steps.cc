// Every optimizer's step on the CPU: two templates over the rules of lib/core/optimizer_formulas.h
// (the same formulas the CUDA steps run, rounded once per operation, so the bits agree) and one
// registration line per optimizer.
//   element-wise rules: one pass over the arena, update() per parameter
//   tensor-wise rules (LAMB): moments() per parameter, with per-chunk sums of w^2 and u^2; each
//     tensor's ratio from its chunks in order; apply() per parameter
// Both skip the update when the step is flagged non-finite, then check the weights.
#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_ops.h"
#include "lib/backend/backend.h"
#include "lib/optim/optimizer.h"

namespace trainer {
namespace {

template <class Rule>
class ElementwiseStep : public OptimizerKernel {
 public:
  explicit ElementwiseStep(const OptimizerSpec& spec)
      : rule_(spec.hyper), n_(spec.n), slots_(rule_.slots()) {}
  void step(float* w, const float* g, float* const* state, StepScalars* s) override {
    if (!(s->nonfinite & kNonfiniteSkipsUpdate)) {
      const typename Rule::Coeffs c = rule_.coeffs(s->lr, s->step, s->optim);
      const OptimizerState st = OptimizerState::of(state, slots_);
      const int64_t n = n_;
#pragma omp parallel for simd if (n > 65536) firstprivate(c, st)
      for (int64_t i = 0; i < n; ++i) Rule::update(c, w[i], g[i], st, i);
    }
    cpu::check_finite(w, n_, kNonfiniteWeights, *s);
  }

 private:
  Rule rule_;
  int64_t n_;
  int slots_;
};

constexpr int64_t kChunk = 2048;  // floats per partial sum (the CUDA step's too)

template <class Rule>
class TensorwiseStep : public OptimizerKernel {
 public:
  explicit TensorwiseStep(const OptimizerSpec& spec)
      : rule_(spec.hyper),
        n_(spec.n),
        slots_(rule_.slots()),
        chunks_(tensor_chunks(spec, kChunk)),
        sums_(chunks_.size() * 2),
        ratio_(chunks_.size()) {}
  void step(float* w, const float* g, float* const* state, StepScalars* s) override {
    if (!(s->nonfinite & kNonfiniteSkipsUpdate)) {
      const typename Rule::Coeffs c = rule_.coeffs(s->lr, s->step, s->optim);
      const OptimizerState st = OptimizerState::of(state, slots_);
      const int64_t nc = int64_t(chunks_.size());
#pragma omp parallel for schedule(static) if (n_ > 65536)
      for (int64_t k = 0; k < nc; ++k) {
        double w_sq = 0, u_sq = 0;
        for (int64_t i = chunks_[size_t(k)].begin; i < chunks_[size_t(k)].end; ++i) {
          const float u = Rule::moments(c, w[i], g[i], st, i);
          w_sq += double(w[i]) * double(w[i]);
          u_sq += double(u) * double(u);
        }
        sums_[size_t(2 * k)] = w_sq;
        sums_[size_t(2 * k + 1)] = u_sq;
      }
      for (int64_t k = 0; k < nc; ++k) {  // each tensor's chunks, in order
        const TensorChunk& ch = chunks_[size_t(k)];
        if (ch.first != k) continue;
        double w_sq = 0, u_sq = 0;
        for (int32_t j = ch.first; j < ch.first + ch.count; ++j) {
          w_sq += sums_[size_t(2 * j)];
          u_sq += sums_[size_t(2 * j + 1)];
        }
        const float r = Rule::ratio(w_sq, u_sq);
        for (int32_t j = ch.first; j < ch.first + ch.count; ++j) ratio_[size_t(j)] = r;
      }
#pragma omp parallel for schedule(static) if (n_ > 65536)
      for (int64_t k = 0; k < nc; ++k)
        for (int64_t i = chunks_[size_t(k)].begin; i < chunks_[size_t(k)].end; ++i)
          Rule::apply(c, w[i], st, i, ratio_[size_t(k)]);
    }
    cpu::check_finite(w, n_, kNonfiniteWeights, *s);
  }

 private:
  Rule rule_;
  int64_t n_;
  int slots_;
  std::vector<TensorChunk> chunks_;
  std::vector<double> sums_;  // per chunk: w^2, u^2 (host memory, sized when planned)
  std::vector<float> ratio_;  // per chunk: its tensor's trust ratio
};

template <class Rule>
void add(OptimizerRegistry& r) {
  r.add_kernel(Rule::kName, "cpu", [](const OptimizerSpec& spec) -> std::unique_ptr<OptimizerKernel> {
    if constexpr (Rule::kTensorwise)
      return std::make_unique<TensorwiseStep<Rule>>(spec);
    else
      return std::make_unique<ElementwiseStep<Rule>>(spec);
  });
}

}  // namespace

void register_cpu_optimizers(OptimizerRegistry& r) {
  for_each_optimizer_rule([&](auto rule) { add<typename decltype(rule)::type>(r); });
}

}  // namespace trainer
