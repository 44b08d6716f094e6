// A gelu in its tanh form that alone takes a dense layer's output runs in the layer's cuBLASLt
// epilogue (KernelContext::fused_gelu, GELU_AUX_BIAS; kernels/cuda/dense_cuda.cc), and the bias
// of a 16-bit dense layer in its epilogue too (f32, or the 16-bit copy of it):
//   - fp32: the fused GPU model trains, evaluates and predicts like the CPU's (which keeps the
//     gelu apart), with and without a bias, over rows of positions (GPT-2's MLP) and flat rows;
//   - bf16 and fp16: the fused model is as close to the CPU's fp32 training as its unfused twin
//     (an identity view between dense and gelu keeps them apart): the epilogue takes gelu of the
//     f32 sums, the unfused gelu of their 16-bit rounding;
//   - gelu's erf form, and a gelu whose input has another reader, stay apart.
#include <string>

#include "lib/config/config.h"
#include "tests/gpu/fusion_run.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;

namespace {

// GPT-2's MLP over 8 positions of 16 features, then a classifier: c_fc (bias), c_fc2 (no bias).
const char* kFused = R"(model:
  input_shape: [8, 16]
  layers:
    - {type: dense, name: c_fc, units: 64, per_position: true}
    - {type: gelu, name: g1, approximate: tanh}
    - {type: dense, name: c_proj, units: 16, per_position: true}
    - {type: dense, name: c_fc2, units: 32, per_position: true, use_bias: false}
    - {type: gelu, name: g2, approximate: tanh}
    - {type: flatten, name: flat}
    - {type: dense, name: fc, units: 24}
    - {type: gelu, name: g3, approximate: tanh}
    - {type: dense, name: out, units: 6}
data: {train: {format: random}, num_classes: 6}
)";

std::string unfused_yaml() {
  std::string y = kFused;
  for (const std::string p : {"c_fc", "c_fc2", "fc"}) {
    const size_t at = y.find('}', y.find("name: " + p + ",")) + 1;
    y.insert(at, "\n    - {type: identity, name: id_" + p + "}");
  }
  return y;
}

Model model_of(const std::string& yaml) {
  Config c = parse_config(yaml, "gelu.yaml", {});
  return Model(c.input_shape, c.layers, c.init, c.file);
}

}  // namespace

TEST_CASE("gpu dense layers with a fused gelu train like the CPU's in fp32", "[gpu][fusion][gelu]") {
  const Model model = model_of(kFused);
  const FusionRun cpu = run_fusion(cpu_backend(), model, MathMode::strict_fp32, false);
  const FusionRun gpu = run_fusion(cuda_backend(), model, MathMode::strict_fp32, false);
  CHECK(cpu.fused == 0);
  CHECK(gpu.fused == 3);
  const double e = rel_error(gpu.params, cpu.params);
  INFO("parameters rel " << e);
  CHECK(e < 1e-4);
  CHECK(std::abs(gpu.train.loss_sum - cpu.train.loss_sum) <= 1e-5 * std::abs(cpu.train.loss_sum));
  CHECK(std::abs(gpu.eval.loss_sum - cpu.eval.loss_sum) <= 1e-5 * std::abs(cpu.eval.loss_sum));
  CHECK(rel_error(gpu.out, cpu.out) < 1e-4);
}

TEST_CASE("gpu dense layers with a fused gelu in 16 bits are as close to fp32 as the separate gelu",
          "[gpu][fusion][gelu][bf16]") {
  const Model fused = model_of(kFused), unfused = model_of(unfused_yaml());
  const FusionRun ref = run_fusion(cpu_backend(), fused, MathMode::strict_fp32, false);
  for (MathMode math : {MathMode::bf16, MathMode::fp16}) {
    if (!gpu_has_math(math)) continue;
    INFO(math_name(math));
    const FusionRun a = run_fusion(cuda_backend(), fused, math, false, nullptr, false);
    const FusionRun b = run_fusion(cuda_backend(), unfused, math, false, nullptr, false);
    CHECK(a.fused == 3);
    CHECK(b.fused == 0);
    const double ea = rel_error(a.params, ref.params), eb = rel_error(b.params, ref.params);
    const double oa = rel_error(a.out, ref.out), ob = rel_error(b.out, ref.out);
    INFO("parameters rel: fused " << ea << ", unfused " << eb << "; outputs rel: fused " << oa << ", unfused "
                                  << ob);
    CHECK(ea <= 1.5 * eb + 1e-3);
    CHECK(oa <= 1.5 * ob + 1e-3);
    CHECK(std::abs(a.train.loss_sum - ref.train.loss_sum) <= 2e-2 * std::abs(ref.train.loss_sum));
  }
}

TEST_CASE("gpu keeps gelu's erf form, and a gelu whose input has other readers, apart",
          "[gpu][fusion][gelu]") {
  const Model erf = model_of(R"(model:
  input_shape: [16]
  layers:
    - {type: dense, name: a, units: 32}
    - {type: gelu, name: g}
    - {type: dense, name: out, units: 6}
data: {train: {format: random}, num_classes: 6}
)");
  CHECK(run_fusion(cuda_backend(), erf, MathMode::strict_fp32, false).fused == 0);
  const Model shared = model_of(R"(model:
  input_shape: [16]
  layers:
    - {type: dense, name: a, units: 32}
    - {type: gelu, name: g, approximate: tanh}
    - {type: add, name: sum, inputs: [g, a]}
    - {type: dense, name: out, units: 6}
data: {train: {format: random}, num_classes: 6}
)");
  const FusionRun cpu = run_fusion(cpu_backend(), shared, MathMode::strict_fp32, false);
  const FusionRun gpu = run_fusion(cuda_backend(), shared, MathMode::strict_fp32, false);
  CHECK(gpu.fused == 0);
  CHECK(rel_error(gpu.params, cpu.params) < 1e-4);
}
