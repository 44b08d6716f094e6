// A relu that alone takes a batchnorm's output runs inside the CUDA batchnorm kernel
// (KernelContext::fused_relu; kernels/cuda/batchnorm.cu):
//   - fused and unfused (an identity view between the two layers keeps them apart) train,
//     evaluate and predict bit for bit alike in fp32, bf16 and fp16, NCHW (plain layouts) and
//     channels-last (backend layouts: 16-bit convolutions hand batchnorm NHWC), including a fused
//     pair on the model's input and one whose channels-last core must hand flatten NCHW (its
//     output edge transposes dz into a buffer of its own, so the core's z survives);
//   - the fused GPU model trains like the fused CPU model in fp32.
//   - the same through the synchronized kernels (device.sync_batchnorm over a one-replica NCCL
//     collective), whose reductions and dx read z and dz too.
#include <iostream>

#include "lib/backend/device_collective.h"
#include "lib/config/config.h"
#include "lib/model/executor.h"
#include "tests/gpu/fusion_run.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;

namespace {

// Three fused pairs: on the model's input; between convolutions, its relu also the shortcut of an
// add; after a convolution (channels-last in 16 bits), into flatten (which needs NCHW).
const char* kFused = R"(model:
  input_shape: [3, 10, 10]
  layers:
    - {type: batchnorm, name: bn_in}
    - {type: relu, name: r_in}
    - {type: conv2d, name: c0, filters: 16, kernel_size: 3, padding: same}
    - {type: batchnorm, name: bn0}
    - {type: relu, name: r0}
    - {type: conv2d, name: c1, filters: 16, kernel_size: 3, padding: same}
    - {type: add, name: add, inputs: [c1, r0]}
    - {type: conv2d, name: c2, filters: 16, kernel_size: 3}
    - {type: batchnorm, name: bn1}
    - {type: relu, name: r1}
    - {type: flatten, name: flat}
    - {type: dense, name: fc, units: 6}
data: {train: {format: random}, num_classes: 6}
)";

// The same model with every pair kept apart.
std::string unfused_yaml() {
  std::string y = kFused;
  for (const char* bn : {"bn_in}", "bn0}", "bn1}"}) {
    const size_t at = y.find(bn) + std::string(bn).size();
    y.insert(at, std::string("\n    - {type: identity, name: id_") +
                     std::string(bn, std::string(bn).size() - 1) + "}");
  }
  return y;
}

}  // namespace

TEST_CASE("gpu batchnorm with a fused relu trains bit for bit as the separate relu", "[gpu][fusion]") {
  check_fused_bitwise(kFused, unfused_yaml(), 3);
}

TEST_CASE("gpu batchnorm with a fused relu trains like the CPU's", "[gpu][fusion]") {
  check_fused_like_cpu(kFused, 3, 3);
}

TEST_CASE("gpu synchronized batchnorm with a fused relu trains bit for bit as the separate relu",
          "[gpu][nccl][sync_batchnorm][fusion]") {
  CudaBackend& be = cuda_backend();
  if (!be.collectives_unavailable().empty()) {
    std::cout << "SKIPPED: " << be.collectives_unavailable() << "\n";
    return;
  }
  std::unique_ptr<DeviceCollective> one = be.join_collective(be.make_collective_id(), 0, 1);
  Config cf = parse_config(kFused, "fused.yaml", {});
  Config cu = parse_config(unfused_yaml(), "unfused.yaml", {});
  Model fused(cf.input_shape, cf.layers, cf.init, cf.file);
  Model unfused(cu.input_shape, cu.layers, cu.init, cu.file);
  for (MathMode math : {MathMode::strict_fp32, MathMode::bf16, MathMode::fp16}) {
    if (math != MathMode::strict_fp32 && !gpu_has_math(math)) continue;
    INFO(math_name(math));
    const FusionRun a = run_fusion(be, fused, math, false, one.get());
    const FusionRun b = run_fusion(be, unfused, math, false, one.get());
    CHECK(a.fused == 3);
    CHECK(a.train.loss_sum == b.train.loss_sum);
    CHECK(a.params == b.params);
    CHECK(a.buffers == b.buffers);
    CHECK(a.out == b.out);
  }
}

// In-place outputs (Executor::overwritable_input): a residual block whose add writes over its
// batchnorm's output (its relu runs inside the add), against the same block with identity views in
// front of both (every output in its own memory).
TEST_CASE("gpu a residual add written over its input trains bit for bit as with separate memory",
          "[gpu][fusion][in_place]") {
  const std::string shared = R"(model:
  input_shape: [3, 10, 10]
  layers:
    - {type: conv2d, name: c0, filters: 16, kernel_size: 3, padding: same}
    - {type: batchnorm, name: bn0}
    - {type: relu, name: r0}
    - {type: conv2d, name: c1, filters: 16, kernel_size: 3, padding: same}
    - {type: batchnorm, name: bn1}
    - {type: add, name: add, inputs: [bn1, r0]}
    - {type: relu, name: r1}
    - {type: conv2d, name: c2, filters: 16, kernel_size: 3, padding: same}
    - {type: global_avg_pool, name: pool}
    - {type: dense, name: fc, units: 6}
data: {train: {format: random}, num_classes: 6}
)";
  std::string apart = shared;
  apart.replace(apart.find("inputs: [bn1, r0]"), 17, "inputs: [v1, r0]");
  apart.insert(apart.find("    - {type: add"), "    - {type: identity, name: v1}\n");
  apart.insert(apart.find("    - {type: relu, name: r1}"), "    - {type: identity, name: v2}\n");
  check_same_bitwise(shared, apart, [](const FusionRun& a, const FusionRun& b) {
    CHECK(a.in_place == 1);         // the add over bn1's output; r1 runs inside the add
    CHECK(a.fused == b.fused + 1);  // apart, r1 reads an identity view
    CHECK(b.in_place == 0);
  });
}

// A relu that alone takes an add's output runs inside the add (registered kFusesRelu): the last
// sum stores relu(y), the backward masks dy by it once and hands the masked gradient on. Against
// the twin with an identity view before each relu: an add of the model's input (plain) and a
// convolution's output (channels-last in 16 bits: mixed layouts), a residual add whose batchnorm
// input gets dy's memory, adds of three inputs, and an add both of whose inputs accumulate their
// gradients (each read by a later layer too), where the mask goes into dy's own memory.
TEST_CASE("gpu adds with a fused relu train bit for bit as the separate relu", "[gpu][fusion]") {
  const std::string fused = R"(model:
  input_shape: [8, 10, 10]
  layers:
    - {type: conv2d, name: c_in, filters: 8, kernel_size: 3, padding: same}
    - {type: add, name: a_in, inputs: [input, c_in]}
    - {type: relu, name: r_in}
    - {type: conv2d, name: c0, filters: 8, kernel_size: 3, padding: same}
    - {type: batchnorm, name: bn0}
    - {type: add, name: a0, inputs: [bn0, r_in]}
    - {type: relu, name: r0}
    - {type: conv2d, name: c1, filters: 8, kernel_size: 3, padding: same}
    - {type: add, name: a1, inputs: [c1, r0, r_in]}
    - {type: relu, name: r1}
    - {type: add, name: a2, inputs: [r1, r0]}
    - {type: relu, name: r2}
    - {type: conv2d, name: c2, inputs: [r1], filters: 8, kernel_size: 3, padding: same}
    - {type: conv2d, name: c3, inputs: [r0], filters: 8, kernel_size: 3, padding: same}
    - {type: add, name: a3, inputs: [r2, c2, c3]}
    - {type: relu, name: r3}
    - {type: global_avg_pool, name: gap}
    - {type: dense, name: fc, units: 6}
data: {train: {format: random}, num_classes: 6}
)";
  std::string apart = fused;
  for (const char* r : {"r_in", "r0", "r1", "r2", "r3"}) {
    const std::string relu = std::string("    - {type: relu, name: ") + r + "}";
    apart.insert(apart.find(relu), std::string("    - {type: identity, name: id_") + r + "}\n");
  }
  check_fused_bitwise(fused, apart, 5);
}
