// A two-input add whose sum a layer norm (or rms_norm) right after it alone reads first hands its
// forward to that layer (KernelContext::add_to_next / add_from_input, AddHandoff): the layer norm
// reads both inputs, writes the sum and normalizes it in one kernel (GPT-2's residual stream).
// The model trains, evaluates and predicts bit for bit as its twin with an identity view between
// the add and the norm (which keeps them apart), in fp32, bf16 and fp16; an add whose sum goes to
// another layer first, an add of three inputs and a norm that is not right after the add keep the
// add's own forward.
#include <string>

#include "tests/gpu/fusion_run.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;

namespace {

// Two pre-norm residual blocks over 8 positions of 16 features (GPT-2's pattern, the stream from a
// dense layer as GPT-2's from its embedding, so that it is in 16 bits in bf16 and fp16): the first
// add goes to ln_2 (right after it) and to the second add, which goes to the final rms_norm. The
// second add's first input (c_proj) is read by it alone: its sum may be written over it.
const char* kHanded = R"(model:
  input_shape: [8, 16]
  layers:
    - {type: dense, name: wte, units: 16, per_position: true}
    - {type: layer_norm, name: ln_1}
    - {type: dense, name: attn, units: 16, per_position: true}
    - {type: add, name: attn.residual, inputs: [attn, wte]}
    - {type: layer_norm, name: ln_2}
    - {type: dense, name: c_fc, units: 32, per_position: true}
    - {type: gelu, name: g, approximate: tanh}
    - {type: dense, name: c_proj, units: 16, per_position: true}
    - {type: add, name: mlp.residual, inputs: [c_proj, attn.residual]}
    - {type: rms_norm, name: ln_f}
    - {type: flatten, name: flat}
    - {type: dense, name: out, units: 6}
data: {train: {format: random}, num_classes: 6}
)";

std::string apart(std::string y) {
  for (const std::string a : {"attn.residual", "mlp.residual"}) {
    const size_t at = y.find('}', y.find("name: " + a + ",")) + 1;
    y.insert(at, "\n    - {type: identity, name: id_" + a + "}");
  }
  return y;
}

}  // namespace

TEST_CASE("gpu layer norms compute the add before them bit for bit as the add", "[gpu][fusion][add]") {
  check_same_bitwise(kHanded, apart(kHanded), [](const FusionRun& a, const FusionRun& b) {
    CHECK(a.adds_handed == 2);
    CHECK(b.adds_handed == 0);
  });
}

TEST_CASE("gpu adds keep their forward where the norm is not their first reader, or they sum three",
          "[gpu][fusion][add]") {
  Config c = parse_config(R"(model:
  input_shape: [16]
  layers:
    - {type: dense, name: a, units: 16}
    - {type: dense, name: b, units: 16}
    - {type: add, name: s1, inputs: [a, b]}
    - {type: dense, name: c, units: 16, inputs: [s1]}
    - {type: layer_norm, name: n1, inputs: [s1]}
    - {type: add, name: s3, inputs: [n1, c, a]}
    - {type: layer_norm, name: n2}
    - {type: dense, name: out, units: 6}
data: {train: {format: random}, num_classes: 6}
)",
                          "kept.yaml", {});
  const Model model(c.input_shape, c.layers, c.init, c.file);
  const FusionRun cpu = run_fusion(cpu_backend(), model, MathMode::strict_fp32, false);
  const FusionRun gpu = run_fusion(cuda_backend(), model, MathMode::strict_fp32, false);
  CHECK(gpu.adds_handed == 0);
  CHECK(rel_error(gpu.params, cpu.params) < 1e-4);
  CHECK(rel_error(gpu.out, cpu.out) < 1e-4);
}
