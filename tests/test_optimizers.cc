// The optimizer conformance table (tests/optimizer_rows.h) on the CPU: every row's updates against
// its float64 reference, over an arena of three tensors with padding between them, five steps
// with a changing learning rate; every registered optimizer has a row; the registry's entries are
// whole; a flagged step updates nothing.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <set>

#include "kernels/cpu/cpu_backend.h"
#include "lib/backend/step_kernels.h"
#include "lib/core/rng.h"
#include "tests/optimizer_rows.h"

using namespace trainer;
using namespace trainer::optim_tests;

namespace {

// Three tensors with padding between them (it must stay untouched: zero).
const std::vector<ParamRange> kTensors = {{0, 5}, {8, 3}, {16, 7}};
constexpr int64_t kArena = 24;

std::vector<float> random_arena(uint64_t seed, float lo, float hi) {
  SplitMix64 rng = SplitMix64::counter(seed);
  std::vector<float> v(size_t(kArena), 0.f);
  for (const ParamRange& r : kTensors)
    for (int64_t i = r.offset; i < r.offset + r.size; ++i)
      v[size_t(i)] = lo + (hi - lo) * float(rng.uniform());
  return v;
}

}  // namespace

TEST_CASE("every optimizer follows its float64 reference on the CPU", "[optim]") {
  CpuBackend be;
  for (const OptimizerRow& row : optimizer_rows()) {
    INFO("optimizer " << row.yaml);
    const Optimizer opt(optimizer_from(row.yaml));
    auto step = opt.make_kernel(be, kArena, kTensors);
    std::vector<char> scratch(step->scratch_bytes() + 1);
    step->bind(scratch.data());
    std::vector<float> w = random_arena(1, -1.f, 1.f);
    std::vector<double> w_ref(w.begin(), w.end());
    std::vector<float> state(size_t(kMaxOptimizerSlots * kArena), 0.f);
    std::vector<std::vector<double>> st_ref(kMaxOptimizerSlots, std::vector<double>(size_t(kArena), 0.0));
    float* slots[kMaxOptimizerSlots] = {state.data(), state.data() + kArena, state.data() + 2 * kArena};
    StepScalars s;
    for (int64_t t = 1; t <= 5; ++t) {
      const std::vector<float> g = random_arena(10 + uint64_t(t), -0.5f, 0.5f);
      const float lr = float(opt.config().lr) * (1.f - 0.1f * float(t));
      opt.prepare(s, t, lr);
      step->step(w.data(), g.data(), slots, &s);
      const std::vector<double> gd(g.begin(), g.end());
      RefStep r{opt.config().hyper, double(lr), t, w_ref, gd, st_ref, kTensors};
      row.ref(r);
      for (size_t i = 0; i < w.size(); ++i) {
        INFO("step " << t << ", element " << i);
        REQUIRE(std::abs(double(w[i]) - w_ref[i]) <= 2e-6 * (1 + std::abs(w_ref[i])));
      }
      for (int k = 0; k < opt.state_slots(); ++k)
        for (size_t i = 0; i < size_t(kArena); ++i)
          REQUIRE(std::abs(double(state[size_t(k * kArena) + i]) - st_ref[size_t(k)][i]) <=
                  2e-6 * (1 + std::abs(st_ref[size_t(k)][i])));
      REQUIRE(s.nonfinite == 0);
    }
  }
}

TEST_CASE("every registered optimizer has a conformance row, a doc, kernels and named state", "[optim]") {
  std::set<std::string> rows;
  for (const OptimizerRow& row : optimizer_rows()) rows.insert(optimizer_from(row.yaml).type);
  for (const OptimizerEntry& e : OptimizerRegistry::global().entries()) {
    INFO("optimizer " << e.name);
    CHECK(rows.count(e.name) == 1);
    CHECK_FALSE(e.doc.empty());
    CHECK(e.kernels.count("cpu") == 1);
    for (const std::string& n : e.state_names) CHECK_FALSE(n.empty());
    const Optimizer opt(optimizer_from("{type: " + e.name + "}"));  // every default resolves
    CHECK(opt.state_names().size() == size_t(opt.state_slots()));
  }
  CHECK(rows.size() == OptimizerRegistry::global().entries().size());
}

TEST_CASE("an optimizer step flagged non-finite changes neither weights nor state, on every optimizer",
          "[optim][divergence]") {
  CpuBackend be;
  for (const OptimizerRow& row : optimizer_rows()) {
    for (uint32_t bits :
         {uint32_t(kNonfiniteLoss), uint32_t(kNonfiniteGradients), uint32_t(kGradientOverflow)}) {
      INFO("optimizer " << row.yaml << ", bits " << bits);
      const Optimizer opt(optimizer_from(row.yaml));
      auto step = opt.make_kernel(be, kArena, kTensors);
      std::vector<char> scratch(step->scratch_bytes() + 1);
      step->bind(scratch.data());
      std::vector<float> w = random_arena(3, -1.f, 1.f), g = random_arena(4, -1.f, 1.f);
      std::vector<float> state = random_arena(5, 0.f, 1.f);
      state.resize(size_t(3 * kArena), 0.5f);
      g[1] = std::numeric_limits<float>::quiet_NaN();
      const auto w0 = w, st0 = state;
      float* slots[3] = {state.data(), state.data() + kArena, state.data() + 2 * kArena};
      StepScalars s;
      opt.prepare(s, 3, 0.01f);
      s.nonfinite = bits;
      step->step(w.data(), g.data(), slots, &s);
      REQUIRE(w == w0);
      REQUIRE(state == st0);
      REQUIRE(s.nonfinite == bits);  // the weights are finite: nothing added
      w[2] = std::numeric_limits<float>::infinity();
      step->step(w.data(), g.data(), slots, &s);
      REQUIRE(s.nonfinite == (bits | kNonfiniteWeights));  // checked on a skipped step too
    }
  }
}

TEST_CASE("optimizer configs: defaults, constraints and names", "[optim][config]") {
  const Optimizer lion(optimizer_from("{type: lion}"));
  CHECK(lion.config().lr == Approx(1e-4));
  CHECK(lion.config().hyper.get("beta2") == Approx(0.99));
  CHECK(lion.state_names() == std::vector<std::string>{"exp_avg"});
  const Optimizer lamb(optimizer_from("{type: lamb}"));
  CHECK(lamb.config().hyper.get("eps") == Approx(1e-6));
  CHECK(lamb.config().hyper.get("weight_decay") == Approx(0.01));
  CHECK(lamb.state_names() == std::vector<std::string>{"exp_avg", "exp_avg_sq"});
  CHECK(Optimizer(optimizer_from("{type: sgd}")).state_slots() == 0);
  CHECK(Optimizer(optimizer_from("{type: sgd, momentum: 0.5}")).state_names() ==
        std::vector<std::string>{"momentum_buffer"});
  CHECK(Optimizer(OptimizerConfig{}).config().type == "adam");  // a default config is Adam's defaults
  CHECK(Optimizer(OptimizerConfig{}).config().hyper.get("beta1") == Approx(0.9));
  REQUIRE_THROWS_WITH(optimizer_from("{type: sgd, nesterov: true}"), Catch::Contains("needs momentum > 0"));
  REQUIRE_THROWS_WITH(optimizer_from("{type: lion, eps: 1e-8}"), Catch::Contains("eps"));
  REQUIRE_THROWS_WITH(optimizer_from("{type: lamb, beta1: 1.5}"), Catch::Contains("beta1"));
  REQUIRE_THROWS_WITH(optimizer_from("{type: lanb}"), Catch::Contains("lamb"));
}
