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

#include "lib/config/config.h"
#include "lib/dist/device_collective.h"
#include "lib/model/executor.h"
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

struct Run {
  std::vector<float> params, buffers, out;
  MetricSums train, eval;
  int fused = 0;
};

// collective: synchronized batchnorm through it (one replica: the synchronized kernels).
Run run(Backend& be, const Model& model, MathMode math, bool plain_layouts,
        DeviceCollective* collective = nullptr) {
  const Optimizer opt(make_optimizer("{type: sgd, lr: 0.05, momentum: 0.9}"));
  ExecutorOptions o;
  o.batch_sizes = {16};
  o.num_classes = 6;
  o.loss = LossKind::cross_entropy_logits;
  o.math = math;
  o.seed = 5;
  o.plain_layouts = plain_layouts;
  o.deterministic = true;
  o.loss_scaling = math == MathMode::fp16;
  o.loss_scale_init = 1024.f;
  o.collective = collective;
  o.sync_batchnorm = collective != nullptr;
  Executor ex(model, be, opt, o);
  Run r;
  r.fused = ex.fused_relus();
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

}  // namespace

TEST_CASE("gpu batchnorm with a fused relu trains bit for bit as the separate relu", "[gpu][fusion]") {
  Config cf = parse_config(kFused, "fused.yaml", {});
  Config cu = parse_config(unfused_yaml(), "unfused.yaml", {});
  Model fused(cf.input_shape, cf.layers, cf.init, cf.file);
  Model unfused(cu.input_shape, cu.layers, cu.init, cu.file);
  for (MathMode math : {MathMode::strict_fp32, MathMode::bf16, MathMode::fp16}) {
    if (math != MathMode::strict_fp32 && !gpu_has_math(math)) continue;
    for (bool plain : {true, false}) {
      INFO(math_name(math) << (plain ? ", NCHW" : ", backend layouts (channels-last in 16 bits)"));
      const Run a = run(cuda_backend(), fused, math, plain);
      const Run b = run(cuda_backend(), unfused, math, plain);
      CHECK(a.fused == 3);
      CHECK(b.fused == 0);
      CHECK(a.train.loss_sum == b.train.loss_sum);
      CHECK(a.eval.loss_sum == b.eval.loss_sum);
      CHECK(a.params == b.params);
      CHECK(a.buffers == b.buffers);
      CHECK(a.out == b.out);
    }
  }
}

TEST_CASE("gpu batchnorm with a fused relu trains like the CPU's", "[gpu][fusion]") {
  Config c = parse_config(kFused, "fused.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  const Run cpu = run(cpu_backend(), model, MathMode::strict_fp32, false);
  const Run gpu = run(cuda_backend(), model, MathMode::strict_fp32, false);
  CHECK(cpu.fused == 3);
  CHECK(gpu.fused == 3);
  const double e = rel_error(gpu.params, cpu.params), eb = rel_error(gpu.buffers, cpu.buffers);
  INFO("parameters rel " << e << ", running statistics rel " << eb);
  CHECK(e < 1e-4);
  CHECK(eb < 1e-4);
  CHECK(std::abs(gpu.train.loss_sum - cpu.train.loss_sum) <= 1e-5 * std::abs(cpu.train.loss_sum));
  CHECK(rel_error(gpu.out, cpu.out) < 1e-4);
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
    const Run a = run(be, fused, math, false, one.get());
    const Run b = run(be, unfused, math, false, one.get());
    CHECK(a.fused == 3);
    CHECK(a.train.loss_sum == b.train.loss_sum);
    CHECK(a.params == b.params);
    CHECK(a.buffers == b.buffers);
    CHECK(a.out == b.out);
  }
}
