// math: bf16 on the CPU (oneDNN's bf16 convolutions and inner products, AVX-512 BF16 / AMX): the
// outputs and gradients of a CNN are within bf16's error of the fp32 ones, and measurably not
// equal to them (bf16 really ran). Where the CPU has no bf16 instructions the case says SKIPPED
// and ctest reports it as skipped (tests/CMakeLists.txt); fit then falls back to fp32 with a note.
#include <catch2/catch.hpp>
#include <cmath>
#include <iostream>
#include <sstream>

#include "kernels/cpu/cpu_backend.h"
#include "lib/config/config.h"
#include "lib/core/rng.h"
#include "lib/model/executor.h"
#include "lib/train/fit.h"
#include "tests/conformance/harness.h"
#include "tests/test_util.h"

using namespace trainer;

namespace {

const char* kYaml = R"(model:
  input_shape: [3, 12, 12]
  layers:
    - {type: conv2d, filters: 16, kernel_size: 3, padding: same}
    - {type: relu}
    - {type: maxpool2d, pool_size: 2}
    - {type: conv2d, filters: 32, kernel_size: 3}
    - {type: relu}
    - {type: flatten}
    - {type: dense, units: 64}
    - {type: relu}
    - {type: dense, units: 10}
data: {train: {format: random}, num_classes: 10}
)";

struct Run {
  std::vector<float> out, grads;
};

Run run(const Model& model, MathMode math, const std::vector<float>& x, const std::vector<int32_t>& y,
        int64_t batch) {
  CpuBackend backend;
  OptimizerConfig oc;
  oc.type = "sgd";
  Optimizer opt(oc);
  ExecutorOptions eo = test::classifier_options({batch}, 10);
  eo.math = math;
  Executor ex(model, backend, opt, eo);
  std::vector<float> params(size_t(model.param_arena_floats())), buffers(1);
  model.initialize(params.data(), buffers.data(), 3);
  ex.upload_params(params.data(), buffers.data());
  Run r;
  r.out.resize(size_t(batch * 10));
  ex.predict(batch, x.data(), r.out.data());
  ex.set_gradient_hook([&](float* g) { r.grads.assign(g, g + model.param_arena_floats()); });
  ex.train_step(batch, x.data(), y.data(), 1, 0.f);
  return r;
}

}  // namespace

TEST_CASE("math bf16 on the CPU: convolutions and dense layers within bf16's error of fp32", "[bf16]") {
  if (!CpuBackend::has_bf16_instructions()) {
    std::cout << "SKIPPED: this CPU (" << CpuBackend::cpu_isa() << ") has neither AVX-512 BF16 nor AMX\n";
    return;
  }
  Config c = parse_config(kYaml, "bf16.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  const int64_t batch = 16;
  SplitMix64 rng(11);
  std::vector<float> x(size_t(batch * 3 * 12 * 12));
  for (float& v : x) v = float(rng.next_below(2001)) / 1000.f - 1.f;
  std::vector<int32_t> y(static_cast<size_t>(batch));
  for (int32_t& v : y) v = int32_t(rng.next_below(10));
  const Run fp32 = run(model, MathMode::strict_fp32, x, y, batch);
  const Run bf16 = run(model, MathMode::bf16, x, y, batch);
  const double out = conformance::rel_error(bf16.out, fp32.out),
               grads = conformance::rel_error(bf16.grads, fp32.grads);
  INFO("relative error of bf16 against fp32: outputs " << out << ", gradients " << grads);
  // bf16 keeps 8 bits of mantissa (relative rounding 2^-9 = 2e-3 per operand); sums in fp32.
  REQUIRE(out > 1e-4);  // not fp32: the bf16 primitives ran
  REQUIRE(out < 1e-2);
  REQUIRE(grads > 1e-4);
  REQUIRE(grads < 2e-2);
  // The same inputs give the same bits (no hidden nondeterminism in the bf16 path).
  REQUIRE(run(model, MathMode::bf16, x, y, batch).grads == bf16.grads);
}

TEST_CASE("a run resumes across math modes: fp32 -> bf16 -> fp32, checkpoints stay fp32", "[bf16]") {
  // Where the CPU has no bf16 instructions, bf16 falls back to fp32 with a note, and this still holds.
  const char* yaml = R"(model:
  input_shape: [1, 8, 8]
  layers: [{type: conv2d, filters: 4, kernel_size: 3}, {type: relu}, {type: flatten}, {type: dense, units: 3}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: adam, lr: 0.01}
data: {train: {format: random, samples: 120, seed: 2}, num_classes: 3, batch_size: 40}
train: {epochs: 1, seed: 4}
)";
  const std::string dir = test::temp_dir("bf16_resume") + "/run";
  std::ostringstream out;
  FitOptions first;
  first.out_dir = dir;
  REQUIRE(fit(parse_config(yaml, "r.yaml", {}), first, out).epochs_run == 1);
  FitOptions again;
  again.resume_dir = dir;
  const FitResult bf16 =
      fit(parse_config(yaml, "r.yaml", {"train.epochs=2", "math=bf16", "low_precision_min_mflops=0"}), again,
          out);
  REQUIRE(bf16.epochs_run == 2);
  const FitResult fp32 = fit(parse_config(yaml, "r.yaml", {"train.epochs=3", "math=fp32"}), again, out);
  REQUIRE(fp32.epochs_run == 3);
  REQUIRE(std::isfinite(fp32.final_train_loss));
  REQUIRE(fp32.steps == 9);
}
