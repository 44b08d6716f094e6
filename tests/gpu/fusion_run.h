// Trains a model four steps on one backend (batch 16, 6 classes, SGD with momentum,
// deterministic, fixed data), then evaluates and predicts: what the fusion tests compare between
// a fused model and its unfused twin, or between backends.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lib/backend/device_collective.h"
#include "lib/config/config.h"
#include "lib/model/executor.h"
#include "tests/gpu/gpu_test_util.h"

namespace trainer::gpu_test {

struct FusionRun {
  std::vector<float> params, buffers, out;
  MetricSums train, eval;
  int fused = 0;              // relus run inside the kernel before them
  int folded = 0;             // biases taken by the batchnorm after them
  int in_place = 0;           // outputs written over their input's memory
  int adds_handed = 0;        // adds whose forward the layer after them does (AddHandoff)
  int normalizes_handed = 0;  // batchnorms whose output the pooling after them computes
  bool low_params = false;    // the executor keeps a 16-bit copy of the parameters
};

// collective: synchronized batchnorm through it (one replica: the synchronized kernels).
// deterministic false: the kernels the backend times fastest (our convolutions among them).
// fold_bias, low_params: ExecutorOptions::fold_bias, low_precision_params.
inline FusionRun run_fusion(Backend& be, const Model& model, MathMode math, bool plain_layouts,
                            DeviceCollective* collective = nullptr, bool deterministic = true,
                            bool fold_bias = true, bool low_params = true) {
  const Optimizer opt(make_optimizer("{type: sgd, lr: 0.05, momentum: 0.9}"));
  ExecutorOptions o;
  o.batch_sizes = {16};
  o.num_classes = 6;
  o.loss = loss_config("cross_entropy");
  o.math = math;
  o.seed = 5;
  o.plain_layouts = plain_layouts;
  o.fold_bias = fold_bias;
  o.low_precision_params = low_params;
  o.deterministic = deterministic;
  o.loss_scaling = math == MathMode::fp16;
  o.loss_scale_init = 1024.f;
  o.collective = collective;
  o.sync_batchnorm = collective != nullptr;
  Executor ex(model, be, opt, o);
  FusionRun r;
  r.fused = ex.fused_activations();
  r.folded = ex.folded_biases();
  r.in_place = ex.outputs_in_place();
  r.adds_handed = ex.adds_handed_over();
  r.normalizes_handed = ex.normalizes_handed_over();
  for (const auto& [what, bytes] : ex.memory_breakdown())
    r.low_params = r.low_params || what.find("parameters in 16 bits") != std::string::npos;
  r.params.resize(size_t(model.param_arena_floats()));
  r.buffers.resize(size_t(std::max<int64_t>(model.buffer_arena_floats(), 1)));
  model.initialize(r.params.data(), r.buffers.data(), 3);
  ex.upload_params(r.params.data(), r.buffers.data());
  const int64_t in = model.input_shape().numel();
  std::vector<float> x;
  std::vector<int32_t> y(16);
  for (int64_t t = 1; t <= 4; ++t) {
    x = random_vector(size_t(16 * in), 700 + uint64_t(t), -2.f, 2.f);
    for (size_t i = 0; i < y.size(); ++i) y[i] = int32_t((i * 5 + size_t(t)) % 6);
    ex.train_step(16, x.data(), y.data(), t, 0.05f);
  }
  r.train = ex.read_metrics();
  ex.reset_metrics();
  ex.eval_step(16, x.data(), y.data());
  r.eval = ex.read_metrics();
  r.out.resize(16 * 6);
  ex.predict(16, x.data(), r.out.data());
  ex.download_params(r.params.data(), r.buffers.data());
  return r;
}

// Two models with the same parameters train, evaluate and predict bit for bit alike in fp32, bf16
// and fp16 (where the GPU has them), with plain NCHW and with backend layouts (channels-last in 16
// bits); check(a, b) checks what else their plans should show.
inline void check_same_bitwise(const std::string& yaml_a, const std::string& yaml_b,
                               const std::function<void(const FusionRun&, const FusionRun&)>& check) {
  Config ca = parse_config(yaml_a, "a.yaml", {});
  Config cb = parse_config(yaml_b, "b.yaml", {});
  Model model_a(ca.input_shape, ca.layers, ca.init, ca.file);
  Model model_b(cb.input_shape, cb.layers, cb.init, cb.file);
  for (MathMode math : {MathMode::strict_fp32, MathMode::bf16, MathMode::fp16}) {
    if (math != MathMode::strict_fp32 && !gpu_has_math(math)) continue;
    for (bool plain : {true, false}) {
      INFO(math_name(math) << (plain ? ", NCHW" : ", backend layouts (channels-last in 16 bits)"));
      const FusionRun a = run_fusion(cuda_backend(), model_a, math, plain);
      const FusionRun b = run_fusion(cuda_backend(), model_b, math, plain);
      check(a, b);
      CHECK(a.train.loss_sum == b.train.loss_sum);
      CHECK(a.eval.loss_sum == b.eval.loss_sum);
      CHECK(a.params == b.params);
      CHECK(a.buffers == b.buffers);
      CHECK(a.out == b.out);
    }
  }
}

// A fused model and its twin with every pair kept apart (identity views between), `relus` relus
// fused in the first.
inline void check_fused_bitwise(const std::string& fused_yaml, const std::string& unfused_yaml, int relus) {
  check_same_bitwise(fused_yaml, unfused_yaml, [&](const FusionRun& a, const FusionRun& b) {
    CHECK(a.fused == relus);
    CHECK(b.fused == 0);
  });
}

// The fused model trains on the GPU like on the CPU in fp32, `gpu_relus` and `cpu_relus` relus
// fused on each (the CPU fuses only after batchnorm).
inline void check_fused_like_cpu(const std::string& yaml, int gpu_relus, int cpu_relus) {
  Config c = parse_config(yaml, "fused.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  const FusionRun cpu = run_fusion(cpu_backend(), model, MathMode::strict_fp32, false);
  const FusionRun gpu = run_fusion(cuda_backend(), model, MathMode::strict_fp32, false);
  CHECK(cpu.fused == cpu_relus);
  CHECK(gpu.fused == gpu_relus);
  const double e = rel_error(gpu.params, cpu.params), eb = rel_error(gpu.buffers, cpu.buffers);
  INFO("parameters rel " << e << ", running statistics rel " << eb);
  CHECK(e < 1e-4);
  CHECK(eb < 1e-4);
  CHECK(std::abs(gpu.train.loss_sum - cpu.train.loss_sum) <= 1e-5 * std::abs(cpu.train.loss_sum));
  CHECK(rel_error(gpu.out, cpu.out) < 1e-4);
}

}  // namespace trainer::gpu_test
