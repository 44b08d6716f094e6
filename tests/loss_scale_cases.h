// Loss scaling, checked the same way on any backend (tests/test_loss_scale.cc on the CPU,
// tests/gpu/test_gpu_fp16.cc on the GPU, where the steps replay as a CUDA graph): a small dense
// classifier trained on one fixed batch, step by step, reading LossScaleState after every step.
//   trace_steps       the scale's history, and the weights after each step
//   check_rule        every transition of a trace follows GradScaler's rule
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <vector>

#include "lib/config/config.h"
#include "lib/core/rng.h"
#include "lib/model/executor.h"
#include "lib/optim/optimizer.h"

namespace trainer::test {

// 8 features, 4 classes; no batchnorm or dropout, so a step is a pure function of weights and batch.
inline const char* kLossScaleNet = R"(model:
  input_shape: [8]
  layers:
    - {type: dense, units: 16}
    - {type: relu}
    - {type: dense, units: 4}
data: {train: {format: random}, num_classes: 4}
)";

struct ScaleTrace {
  std::vector<float> initial;               // the weights before the first step
  std::vector<LossScaleState> states;       // after each step
  std::vector<std::vector<float>> weights;  // after each step
  NonfiniteRecord record;                   // the divergence record at the end
  double loss_sum = 0;
};

struct ScaleSetup {
  MathMode math = MathMode::strict_fp32;
  bool scaling = true;
  float init = 65536.f;
  LossScaleHyper hyper;
  float x_magnitude = 1.f;  // inputs are uniform in [-x_magnitude, x_magnitude]
  float lr = 0.05f;         // plain SGD
  int steps = 8;
};

inline ScaleTrace trace_steps(Backend& be, const ScaleSetup& s) {
  Config c = parse_config(kLossScaleNet, "loss_scale.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  OptimizerConfig oc;
  oc.type = "sgd";
  oc.lr = s.lr;
  Optimizer opt(oc);
  const int64_t batch = 32;
  ExecutorOptions eo;
  eo.batch_sizes = {batch};
  eo.num_classes = 4;
  eo.loss = loss_config("cross_entropy");
  eo.math = s.math;
  eo.loss_scaling = s.scaling;
  eo.loss_scale_init = s.init;
  eo.loss_scale = s.hyper;
  Executor ex(model, be, opt, eo);
  ScaleTrace t;
  t.initial.resize(size_t(model.param_arena_floats()));
  std::vector<float> buffers(size_t(std::max<int64_t>(model.buffer_arena_floats(), 1)));
  model.initialize(t.initial.data(), buffers.data(), 5);
  ex.upload_params(t.initial.data(), buffers.data());
  SplitMix64 rng(17);
  std::vector<float> x(size_t(batch * 8));
  for (float& v : x) v = (float(rng.next_below(2001)) / 1000.f - 1.f) * s.x_magnitude;
  std::vector<int32_t> y(static_cast<size_t>(batch));
  for (int32_t& v : y) v = int32_t(rng.next_below(4));
  ex.reset_metrics();
  for (int k = 0; k < s.steps; ++k) {
    ex.train_step(batch, x.data(), y.data(), k + 1, s.lr);
    t.states.push_back(ex.read_loss_scale());
    std::vector<float> w(t.initial.size());
    ex.download_params(w.data(), buffers.data());
    t.weights.push_back(std::move(w));
  }
  const MetricSums m = ex.read_metrics();
  t.record = m.nonfinite;
  t.loss_sum = m.loss_sum;
  return t;
}

// Each step of the trace against the rule (lib/backend/loss_scale_formula.h), from the state
// `start`; counts the backoffs and growths seen.
struct RuleCount {
  int overflows = 0, growths = 0;
};
inline RuleCount check_rule(const ScaleTrace& t, const ScaleSetup& s) {
  RuleCount n;
  LossScaleState prev;
  prev.scale = s.init;
  prev.inv_scale = 1.f / s.init;
  const std::vector<float>* w_prev = &t.initial;
  for (size_t k = 0; k < t.states.size(); ++k) {
    const LossScaleState& st = t.states[k];
    INFO("step " << k + 1 << ": scale " << prev.scale << " -> " << st.scale << ", good steps "
                 << prev.good_steps << " -> " << st.good_steps << ", overflow steps " << st.overflow_steps);
    const bool overflow = st.overflow_steps == prev.overflow_steps + 1;
    REQUIRE((overflow || st.overflow_steps == prev.overflow_steps));
    if (overflow) {
      ++n.overflows;
      // Skipped: not one weight moved.
      REQUIRE(t.weights[k] == *w_prev);
      REQUIRE(st.scale == prev.scale * (s.hyper.dynamic ? s.hyper.backoff : 1.f));
      if (s.hyper.dynamic) REQUIRE(st.good_steps == 0);
    } else {
      REQUIRE(t.weights[k] != *w_prev);
      if (s.hyper.dynamic && int64_t(prev.good_steps) + 1 == s.hyper.growth_interval) {
        ++n.growths;
        REQUIRE(st.scale == prev.scale * s.hyper.growth);
        REQUIRE(st.good_steps == 0);
      } else {
        REQUIRE(st.scale == prev.scale);
        if (s.hyper.dynamic) REQUIRE(st.good_steps == prev.good_steps + 1);
      }
    }
    REQUIRE(st.inv_scale == 1.f / st.scale);
    prev = st;
    w_prev = &t.weights[k];
  }
  return n;
}

}  // namespace trainer::test
