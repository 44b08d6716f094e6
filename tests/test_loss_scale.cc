// Dynamic loss scaling (train.loss_scale; lib/backend/loss_scale_formula.h) on the CPU backend,
// which takes it in any math mode: an overflowing step is skipped and the scale halved, the scale
// grows back after growth_interval good steps, power-of-two scales leave fp32 training bit for
// bit as it was, the config keys are checked, and the scale survives a checkpoint and a resume.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/cpu/cpu_backend.h"
#include "lib/backend/loss_scale_formula.h"
#include "lib/config/config.h"
#include "lib/core/error.h"
#include "tests/loss_scale_cases.h"
#include "tests/test_util.h"

using namespace trainer;

TEST_CASE("loss scale rule: backoff on overflow, growth after the interval, a fixed scale only counts",
          "[loss_scale]") {
  LossScaleHyper h;
  h.growth_interval = 3;
  LossScaleState st;
  st.scale = 1024.f;
  loss_scale_update(h, st, true);
  REQUIRE(st.scale == 512.f);
  REQUIRE(st.inv_scale == 1.f / 512.f);
  REQUIRE(st.overflow_steps == 1);
  loss_scale_update(h, st, false);
  loss_scale_update(h, st, false);
  REQUIRE(st.scale == 512.f);
  REQUIRE(st.good_steps == 2);
  loss_scale_update(h, st, false);
  REQUIRE(st.scale == 1024.f);
  REQUIRE(st.good_steps == 0);
  // An overflow in the middle of a run of good steps restarts the count.
  loss_scale_update(h, st, false);
  loss_scale_update(h, st, true);
  REQUIRE(st.good_steps == 0);
  REQUIRE(st.scale == 512.f);
  // Growth never makes the scale itself infinite.
  st.scale = std::ldexp(1.f, 127);
  h.growth_interval = 1;
  loss_scale_update(h, st, false);
  REQUIRE(st.scale == std::ldexp(1.f, 127));
  REQUIRE(std::isfinite(st.inv_scale));
  // Fixed: the scale stays, overflows are counted.
  LossScaleHyper fixed;
  fixed.dynamic = false;
  LossScaleState f;
  f.scale = 8.f;
  f.inv_scale = 0.125f;
  loss_scale_update(fixed, f, true);
  loss_scale_update(fixed, f, false);
  REQUIRE(f.scale == 8.f);
  REQUIRE(f.overflow_steps == 1);
}

TEST_CASE("loss scaling: an overflowing step is skipped, the scale halved, then grown back", "[loss_scale]") {
  CpuBackend be;
  test::ScaleSetup s;
  s.init = std::ldexp(1.f, 126);  // inputs of 1e6 make the scaled weight gradients overflow fp32
  s.x_magnitude = 1e6f;
  s.lr = 1e-9f;  // small steps: the gradients stay near 1e5 instead of growing with the weights
  s.hyper.growth_interval = 2;
  s.steps = 40;
  const test::ScaleTrace t = test::trace_steps(be, s);
  const test::RuleCount n = test::check_rule(t, s);
  INFO("final scale " << t.states.back().scale << ", overflow steps " << t.states.back().overflow_steps);
  REQUIRE(t.states.front().overflow_steps == 1);  // the first step overflowed...
  REQUIRE(t.weights.front() == t.initial);        // ...and moved nothing
  REQUIRE(n.overflows >= 2);
  REQUIRE(n.growths >= 1);
  REQUIRE(n.overflows + n.growths < s.steps);  // some steps neither grew nor backed off: real updates
  // Overflows are loss scaling's business, not a divergence: no step was recorded as non-finite
  // and every step's (finite) loss is in the sum.
  REQUIRE(t.record.steps == 0);
  REQUIRE(std::isfinite(t.loss_sum));
  REQUIRE(t.loss_sum > 0);
}

TEST_CASE("loss scaling by powers of two leaves fp32 training bit for bit unchanged", "[loss_scale]") {
  CpuBackend be;
  test::ScaleSetup s;
  s.init = 1024.f;
  s.hyper.growth_interval = 3;
  s.steps = 7;
  const test::ScaleTrace scaled = test::trace_steps(be, s);
  const test::RuleCount n = test::check_rule(scaled, s);
  REQUIRE(n.overflows == 0);
  REQUIRE(n.growths == 2);
  REQUIRE(scaled.states.back().scale == 4096.f);
  test::ScaleSetup off = s;
  off.scaling = false;
  const test::ScaleTrace plain = test::trace_steps(be, off);
  for (int k = 0; k < s.steps; ++k) {
    INFO("step " << k + 1);
    REQUIRE(scaled.weights[size_t(k)] == plain.weights[size_t(k)]);
  }
  REQUIRE(plain.states.back().scale == LossScaleState().scale);  // off: nothing on the device to read
}

TEST_CASE("a fixed loss scale never changes and still skips overflowing steps", "[loss_scale]") {
  CpuBackend be;
  test::ScaleSetup s;
  s.init = std::ldexp(1.f, 126);
  s.x_magnitude = 1e6f;
  s.hyper.dynamic = false;
  s.steps = 3;
  const test::ScaleTrace t = test::trace_steps(be, s);
  test::check_rule(t, s);
  REQUIRE(t.states.back().overflow_steps == 3);
  REQUIRE(t.states.back().scale == s.init);
  REQUIRE(t.weights.back() == t.initial);
}

TEST_CASE("train.loss_scale: auto, dynamic, none or a number; bad values name the key",
          "[loss_scale][config]") {
  const std::string base =
      "model: {input_shape: [4], layers: [{type: dense, units: 2}]}\n"
      "data: {train: {format: random}, num_classes: 2}\n";
  using Mode = LossScaleConfig::Mode;
  REQUIRE(parse_config(base, "a.yaml", {}).loss_scale.mode == Mode::automatic);
  const Config d = parse_config(base +
                                    "train: {loss_scale: dynamic, loss_scale_init: 1024, "
                                    "loss_scale_growth_interval: 50}\n",
                                "d.yaml", {});
  REQUIRE(d.loss_scale.mode == Mode::dynamic);
  REQUIRE(d.loss_scale.init == 1024);
  REQUIRE(d.loss_scale.growth_interval == 50);
  const Config f = parse_config(base + "train: {loss_scale: 128}\n", "f.yaml", {});
  REQUIRE(f.loss_scale.mode == Mode::fixed);
  REQUIRE(f.loss_scale.init == 128);
  REQUIRE(parse_config(base, "n.yaml", {"train.loss_scale=none"}).loss_scale.mode == Mode::none);
  REQUIRE(parse_config(base, "m.yaml", {"math=fp16"}).math == MathMode::fp16);
  REQUIRE_THROWS_WITH(parse_config(base + "train: {loss_scale: banana}\n", "b.yaml", {}),
                      Catch::Contains("b.yaml:3:") && Catch::Contains("train.loss_scale") &&
                          Catch::Contains("'banana' is not allowed") && Catch::Contains("dynamic"));
  REQUIRE_THROWS_WITH(
      parse_config(base + "train: {loss_scale: -4}\n", "n.yaml", {}),
      Catch::Contains("train.loss_scale") && Catch::Contains("or a number from 1e-30 to 1e+38"));
  REQUIRE_THROWS_WITH(
      parse_config(base + "train: {loss_scale: 8, loss_scale_init: 4}\n", "i.yaml", {}),
      Catch::Contains("train.loss_scale_init") && Catch::Contains("goes with loss_scale: dynamic"));
  REQUIRE_THROWS_WITH(parse_config(base + "train: {loss_scale_growth_interval: 0}\n", "g.yaml", {}),
                      Catch::Contains("train.loss_scale_growth_interval"));
  REQUIRE_THROWS_WITH(parse_config(base + "math: fp8\n", "m.yaml", {}),
                      Catch::Contains("math") && Catch::Contains("fp16"));
}

TEST_CASE(
    "fit with loss scaling reports the scale and resumes it from a checkpoint, also under another math mode",
    "[loss_scale][fit]") {
  const std::string dir = test::temp_dir("loss_scale_fit");
  const std::string cfg = test::write_file(dir, "ls.yaml", R"(model:
  input_shape: [8]
  layers: [{type: dense, units: 16}, {type: relu}, {type: dense, units: 3}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: sgd, lr: 0.1}
data: {train: {format: random, samples: 96, seed: 2}, num_classes: 3, batch_size: 16}
train: {epochs: 2, seed: 1, loss_scale: dynamic, loss_scale_init: 256, loss_scale_growth_interval: 4}
)");
  const auto first = test::run_trainer("fit " + cfg + " --out " + dir + "/run --set train.epochs=1");
  INFO(first.out << first.err);
  REQUIRE(first.exit_code == 0);
  REQUIRE(first.err.find("loss scaling: dynamic, from 256") != std::string::npos);
  // 6 good steps: grown once after 4 (256 -> 512), two more counted.
  REQUIRE(first.out.find("loss_scale=512 overflow_steps=0") != std::string::npos);
  const auto summary = nlohmann::json::parse(test::slurp(dir + "/run/summary.json"));
  REQUIRE(summary.at("loss_scale").at("scale").get<double>() == 512);
  // Resumed, the count goes on from 2 good steps: 512 -> 1024 after 2 more, 2048 after 4 more.
  // A resume that lost the state would end epoch 2 at 512 again.
  const auto second = test::run_trainer("fit " + cfg + " --resume " + dir + "/run");
  INFO(second.out << second.err);
  REQUIRE(second.exit_code == 0);
  REQUIRE(second.out.find("loss_scale=2048 overflow_steps=0") != std::string::npos);
  // The same checkpoint resumed without loss scaling (another math mode's run): the saved scale is
  // ignored, the weights and optimizer state carry over.
  const auto plain = test::run_trainer("fit " + cfg + " --resume " + dir +
                                       "/run --set train.epochs=3 --set train.loss_scale=none");
  INFO(plain.out << plain.err);
  REQUIRE(plain.exit_code == 0);
  REQUIRE(plain.out.find("loss_scale=") == std::string::npos);
}
