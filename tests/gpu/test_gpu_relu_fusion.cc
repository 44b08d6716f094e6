// A relu that alone takes a pooling layer's or a convolution's output runs inside the CUDA kernel
// (KernelContext::fused_relu; kernels/cuda/pool2d.cu, cudnn_conv.cc, direct_conv.cu, bias.cu):
//   - fused and unfused (an identity view between the two layers keeps them apart) train,
//     evaluate and predict bit for bit alike in fp32, bf16 and fp16, NCHW (plain layouts) and
//     channels-last (backend layouts: 16-bit convolutions hand pooling NHWC), with cuDNN's
//     deterministic algorithms (the relu rides on the bias kernel, or runs alone without a bias;
//     dz masked in place before backward), through max pooling on the model's input, a 2x2 max
//     pool (the backward that writes whole windows), a padded 3x3 average pool of stride 2 (the
//     backward that gathers) whose channels-last core must hand flatten NCHW (1-D pooling and
//     convolution run the same kernels with H = 1);
//   - the same with the kernels timed fastest (our convolutions store relu(conv + bias) and read
//     dz through the mask where every backward direction is ours), fp32, within rounding: the two
//     models may time different tilings;
//   - the fused GPU model trains like the CPU's (which keeps the relus apart) in fp32.
#include "lib/config/config.h"
#include "tests/gpu/fusion_run.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;

namespace {

const char* kFused = R"(model:
  input_shape: [3, 12, 12]
  layers:
    - {type: maxpool2d, name: p_in, pool_size: 1}
    - {type: relu, name: r_in}
    - {type: conv2d, name: c0, filters: 16, kernel_size: 3, padding: same}
    - {type: relu, name: rc0}
    - {type: maxpool2d, name: p0, pool_size: 2}
    - {type: relu, name: r0}
    - {type: conv2d, name: c1, filters: 16, kernel_size: 3, padding: same, use_bias: false}
    - {type: relu, name: rc1}
    - {type: avgpool2d, name: p1, pool_size: 3, strides: 2, padding: same}
    - {type: relu, name: r1}
    - {type: flatten, name: flat}
    - {type: dense, name: fc, units: 6}
data: {train: {format: random}, num_classes: 6}
)";

std::string unfused_yaml() {
  std::string y = kFused;
  for (const std::string p : {"p_in", "c0", "p0", "c1", "p1"}) {
    const size_t at = y.find('}', y.find("name: " + p + ",")) + 1;  // the end of the pool's line
    y.insert(at, "\n    - {type: identity, name: id_" + p + "}");
  }
  return y;
}

}  // namespace

TEST_CASE("gpu pooling and convolutions with a fused relu train bit for bit as the separate relu",
          "[gpu][fusion]") {
  check_fused_bitwise(kFused, unfused_yaml(), 5);
}

TEST_CASE("gpu pooling and convolutions with a fused relu train like the CPU's", "[gpu][fusion]") {
  check_fused_like_cpu(kFused, 5, 0);
}

TEST_CASE("gpu convolutions with a fused relu train as the separate relu with the fastest kernels",
          "[gpu][fusion][conv]") {
  Config cf = parse_config(kFused, "fused.yaml", {});
  Config cu = parse_config(unfused_yaml(), "unfused.yaml", {});
  Model fused(cf.input_shape, cf.layers, cf.init, cf.file);
  Model unfused(cu.input_shape, cu.layers, cu.init, cu.file);
  const FusionRun a = run_fusion(cuda_backend(), fused, MathMode::strict_fp32, true, nullptr, false);
  const FusionRun b = run_fusion(cuda_backend(), unfused, MathMode::strict_fp32, true, nullptr, false);
  CHECK(a.fused == 5);
  const double e = rel_error(a.params, b.params);
  INFO("parameters rel " << e);
  CHECK(e < 1e-5);
  CHECK(std::abs(a.train.loss_sum - b.train.loss_sum) <= 1e-6 * std::abs(b.train.loss_sum));
  CHECK(rel_error(a.out, b.out) < 1e-5);
}
