// Loss scaling on the GPU (kernels/cuda/loss_scale.cu), where the steps after the second replay
// as one CUDA graph, so every change of the scale below happened on the device inside a replay:
//   - an overflowing step is skipped, the scale halved, then grown back (fp32 with huge inputs,
//     and fp16 with inputs whose scaled gradients pass fp16's 65504), by GradScaler's rule;
//   - power-of-two scales leave fp32 training bit for bit as without them;
//   - a run resumes across math modes: fp32 -> fp16 (starts from the configured scale) -> bf16
//     (keeps no scale) -> fp16 again (from the configured scale, as the bf16 checkpoint has none).
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "lib/config/config.h"
#include "lib/train/fit.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/loss_scale_cases.h"

using namespace trainer;
using namespace trainer::gpu_test;

TEST_CASE("gpu loss scaling in replayed graphs: overflow skipped, scale halved, grown back", "[gpu][fp16]") {
  CudaBackend& be = cuda_backend();
  const size_t graphs = be.graph_count();
  test::ScaleSetup s;
  s.init = std::ldexp(1.f, 126);
  s.x_magnitude = 1e6f;
  s.lr = 1e-9f;
  s.hyper.growth_interval = 2;
  s.steps = 40;
  const test::ScaleTrace t = test::trace_steps(be, s);
  REQUIRE(be.graph_count() == graphs + 1);  // the training step was captured once and replayed
  const test::RuleCount n = test::check_rule(t, s);
  std::cout << "gpu fp32 loss scaling: " << n.overflows << " overflows, " << n.growths << " growths in "
            << s.steps << " steps, final scale " << t.states.back().scale << "\n";
  REQUIRE(t.weights.front() == t.initial);
  REQUIRE(n.overflows >= 2);
  REQUIRE(n.growths >= 1);
  REQUIRE(t.record.steps == 0);
  REQUIRE(std::isfinite(t.loss_sum));

  if (!gpu_has_math(MathMode::fp16)) return;
  test::ScaleSetup h;
  h.math = MathMode::fp16;
  h.init = 65536.f;
  h.x_magnitude = 1e3f;  // fp16 activations hold it; x * scaled dy does not fit in fp16
  h.lr = 1e-6f;
  h.hyper.growth_interval = 2;
  h.steps = 30;
  const test::ScaleTrace f = test::trace_steps(be, h);
  const test::RuleCount m = test::check_rule(f, h);
  std::cout << "gpu fp16 loss scaling: " << m.overflows << " overflows, " << m.growths << " growths in "
            << h.steps << " steps, final scale " << f.states.back().scale << "\n";
  REQUIRE(m.overflows >= 1);
  REQUIRE(m.growths >= 1);
  REQUIRE(f.record.steps == 0);
}

TEST_CASE("gpu loss scaling by powers of two leaves fp32 training bit for bit unchanged", "[gpu][fp16]") {
  test::ScaleSetup s;
  s.init = 1024.f;
  s.hyper.growth_interval = 3;
  s.steps = 7;
  const test::ScaleTrace scaled = test::trace_steps(cuda_backend(), s);
  REQUIRE(test::check_rule(scaled, s).growths == 2);
  test::ScaleSetup off = s;
  off.scaling = false;
  const test::ScaleTrace plain = test::trace_steps(cuda_backend(), off);
  for (size_t k = 0; k < scaled.weights.size(); ++k) {
    INFO("step " << k + 1);
    REQUIRE(scaled.weights[k] == plain.weights[k]);
  }
}

TEST_CASE("gpu fit resumes across math modes: fp32, fp16, bf16, fp16", "[gpu][fp16][fit]") {
  if (!gpu_has_math(MathMode::bf16)) return;
  const char* yaml = R"(model:
  input_shape: [1, 12, 12]
  layers:
    - {type: conv2d, filters: 8, kernel_size: 3, padding: same}
    - {type: batchnorm}
    - {type: relu}
    - {type: maxpool2d}
    - {type: flatten}
    - {type: dense, units: 4}
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: adam, lr: 0.001}
data: {train: {format: random, samples: 128, seed: 4}, num_classes: 4, batch_size: 32}
train: {seed: 2, loss_scale_init: 512, loss_scale_growth_interval: 3}
)";
  const std::string dir = "/tmp/trainer_gpu_fp16_resume_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  auto fit_to = [&](int epochs, const char* math, bool resume) {
    Config cfg =
        parse_config(yaml, "resume.yaml",
                     {"device=gpu:0", std::string("math=") + math, "train.epochs=" + std::to_string(epochs)});
    FitOptions fo;
    fo.device.device = "gpu:0";
    fo.device.math = cfg.math;
    fo.out_dir = resume ? "" : dir;
    fo.resume_dir = resume ? dir : "";
    std::ostringstream out;
    const FitResult r = fit(cfg, fo, out);
    INFO(math << " to epoch " << epochs << ":\n" << out.str());
    REQUIRE(r.epochs_run == epochs);
    REQUIRE(std::isfinite(r.final_train_loss));
    return out.str();
  };
  const std::string a = fit_to(1, "fp32", false);
  CHECK(a.find("loss_scale=") == std::string::npos);
  // 4 steps an epoch: from 512 (no saved scale), grown once after 3 -> 1024, 1 good step counted.
  const std::string b = fit_to(2, "fp16", true);
  CHECK(b.find("loss_scale=1024 overflow_steps=0") != std::string::npos);
  const std::string c = fit_to(3, "bf16", true);
  CHECK(c.find("loss_scale=") == std::string::npos);
  // bf16 saved no scale: fp16 starts from 512 again.
  const std::string d = fit_to(4, "fp16", true);
  CHECK(d.find("loss_scale=1024 overflow_steps=0") != std::string::npos);
  std::filesystem::remove_all(dir);
}
