// A batchnorm whose output a 2-D pooling alone reads (after the batchnorm's fused relu, or
// directly) hands its normalize pass to the pooling (KernelContext::normalize_to_next /
// normalize_from_input, NormalizeHandoff): the pooling computes relu(bn(x)) from the batchnorm's
// input as it reads it, and the batchnorm writes no output.
//   - the model trains, evaluates and predicts bit for bit as its twin with an identity view
//     between each batchnorm (or its relu) and the pooling (which keeps them apart), in fp32, bf16
//     and fp16, NCHW and channels-last; the handoff is taken where the pooling reads packs
//     channels-last (16-bit convolutions hand the batchnorm NHWC): a max pool after a fused relu
//     and an average pool with a relu of its own;
//   - a pooling whose windows overlap (3x3, stride 2) and a batchnorm output that a convolution
//     also reads keep the batchnorm's own pass; the model trains like the CPU's in fp32.
#include <algorithm>
#include <string>

#include "tests/gpu/fusion_run.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;

namespace {

// VGG's block (conv -> batchnorm -> relu -> 2x2 max pool), a batchnorm into an average pool that
// runs its own relu, and a batchnorm whose relu goes to an overlapping pool (not taken).
const char* kHanded = R"(model:
  input_shape: [3, 16, 16]
  layers:
    - {type: conv2d, name: c0, filters: 16, kernel_size: 3, padding: same}
    - {type: batchnorm, name: bn0}
    - {type: relu, name: r0}
    - {type: maxpool2d, name: p0, pool_size: 2}
    - {type: conv2d, name: c1, filters: 16, kernel_size: 3, padding: same}
    - {type: batchnorm, name: bn1}
    - {type: avgpool2d, name: p1, pool_size: 2}
    - {type: relu, name: r1}
    - {type: conv2d, name: c2, filters: 8, kernel_size: 3, padding: same}
    - {type: batchnorm, name: bn2}
    - {type: relu, name: r2}
    - {type: maxpool2d, name: p2, pool_size: 3, strides: 2}
    - {type: flatten, name: flat}
    - {type: dense, name: fc, units: 6}
data: {train: {format: random}, num_classes: 6}
)";

// The same model with an identity view before each pooling.
std::string apart(std::string y) {
  for (const std::string p : {"p0", "p1", "p2"}) {
    const size_t at = y.rfind('\n', y.find("name: " + p + ",")) + 1;  // the pooling's line
    y.insert(at, "    - {type: identity, name: id_" + p + "}\n");
  }
  return y;
}

}  // namespace

TEST_CASE("gpu poolings normalize the batchnorm before them bit for bit as the batchnorm",
          "[gpu][fusion][batchnorm]") {
  int most = 0;
  check_same_bitwise(kHanded, apart(kHanded), [&](const FusionRun& a, const FusionRun& b) {
    CHECK(a.normalizes_handed <= 2);
    CHECK(b.normalizes_handed == 0);
    most = std::max(most, a.normalizes_handed);
  });
  // bf16 (compute capability 8.0 and up) hands the batchnorms channels-last packs.
  if (gpu_has_math(MathMode::bf16)) CHECK(most == 2);
}

TEST_CASE("gpu batchnorms whose output a convolution also reads keep their normalize pass",
          "[gpu][fusion][batchnorm]") {
  Config c = parse_config(R"(model:
  input_shape: [3, 8, 8]
  layers:
    - {type: conv2d, name: c0, filters: 16, kernel_size: 3, padding: same}
    - {type: batchnorm, name: bn0}
    - {type: relu, name: r0}
    - {type: maxpool2d, name: p0, pool_size: 2}
    - {type: conv2d, name: c1, filters: 16, kernel_size: 3, strides: 2, padding: same, inputs: [r0]}
    - {type: add, name: s, inputs: [p0, c1]}
    - {type: flatten, name: flat}
    - {type: dense, name: fc, units: 6}
data: {train: {format: random}, num_classes: 6}
)",
                          "kept.yaml", {});
  const Model model(c.input_shape, c.layers, c.init, c.file);
  for (MathMode math : {MathMode::strict_fp32, MathMode::bf16}) {
    if (math != MathMode::strict_fp32 && !gpu_has_math(math)) continue;
    INFO(math_name(math));
    CHECK(run_fusion(cuda_backend(), model, math, false).normalizes_handed == 0);
  }
  const FusionRun cpu = run_fusion(cpu_backend(), model, MathMode::strict_fp32, false);
  const FusionRun gpu = run_fusion(cuda_backend(), model, MathMode::strict_fp32, false);
  CHECK(rel_error(gpu.params, cpu.params) < 1e-4);
  CHECK(rel_error(gpu.out, cpu.out) < 1e-4);
}

TEST_CASE("gpu poolings that normalize train like the CPU's", "[gpu][fusion][batchnorm]") {
  Config c = parse_config(kHanded, "handed.yaml", {});
  const Model model(c.input_shape, c.layers, c.init, c.file);
  const FusionRun cpu = run_fusion(cpu_backend(), model, MathMode::strict_fp32, false);
  const FusionRun gpu = run_fusion(cuda_backend(), model, MathMode::strict_fp32, false);
  CHECK(rel_error(gpu.params, cpu.params) < 1e-4);
  CHECK(rel_error(gpu.out, cpu.out) < 1e-4);
  CHECK(gpu.normalizes_handed == 0);  // fp32 convolutions hand the batchnorms NCHW
  if (gpu_has_math(MathMode::bf16))
    CHECK(run_fusion(cuda_backend(), model, MathMode::bf16, false).normalizes_handed == 2);
}
