// A convolution's or dense layer's bias before a batchnorm, taken by the batchnorm
// (ExecutorOptions::fold_bias, KernelContext::takes_bias): the layer neither adds the bias nor
// writes its gradient; the batchnorm keeps the running mean of x + b, normalizes eval batches by
// running mean - b and writes the bias's gradient (0 with batch statistics: the bias cancels).
// Four training steps, then eval and predict, against the same model with the bias added and
// differentiated by the layer (fold_bias false), per-replica and synchronized statistics: fp32
// alike within 1e-5 relative in everything (compare); bf16 and fp16 each held to fp32
// (compare_16).
#include <iostream>

#include "lib/backend/device_collective.h"
#include "lib/config/config.h"
#include "tests/gpu/fusion_run.h"

using namespace trainer;
using namespace trainer::gpu_test;

namespace {

// Three folds: a conv into batchnorm + relu (channels-last in 16 bits), a conv into batchnorm
// then pooling, a dense layer into batchnorm (one value per channel a sample). c2's bias stays: a
// relu comes between.
const char* kNet = R"(model:
  input_shape: [3, 10, 10]
  layers:
    - {type: conv2d, name: c0, filters: 8, kernel_size: 3, padding: same}
    - {type: batchnorm, name: bn0}
    - {type: relu, name: r0}
    - {type: conv2d, name: c1, filters: 16, kernel_size: 3, padding: same}
    - {type: batchnorm, name: bn1}
    - {type: maxpool2d, name: p1}
    - {type: conv2d, name: c2, filters: 16, kernel_size: 3, activation: relu}
    - {type: flatten, name: flat}
    - {type: dense, name: d0, units: 16}
    - {type: batchnorm, name: bn2}
    - {type: relu, name: r2}
    - {type: dense, name: out, units: 6}
data: {train: {format: random}, num_classes: 6}
)";

// No fold: c0's output is read by its batchnorm and by the add; c1 has no bias; c2 feeds pooling.
const char* kKept = R"(model:
  input_shape: [3, 8, 8]
  layers:
    - {type: conv2d, name: c0, filters: 8, kernel_size: 3, padding: same}
    - {type: batchnorm, name: bn0}
    - {type: add, name: sum, inputs: [bn0, c0]}
    - {type: conv2d, name: c1, filters: 8, kernel_size: 3, padding: same, use_bias: false}
    - {type: batchnorm, name: bn1}
    - {type: conv2d, name: c2, filters: 8, kernel_size: 3, padding: same}
    - {type: maxpool2d, name: p2}
    - {type: batchnorm, name: bn2}
    - {type: flatten, name: flat}
    - {type: dense, name: out, units: 6}
data: {train: {format: random}, num_classes: 6}
)";

bool folded_bias(const TensorSlot& t) {
  const std::string layer = t.name.substr(0, t.name.find('.'));
  return t.spec.name == "bias" && (layer == "c0" || layer == "c1" || layer == "d0");
}

// The parameters' movement from their initial values: every parameter but the folded biases
// (moved_biases false), or those alone.
std::vector<float> moved(const Model& model, const std::vector<float>& params, bool moved_biases = false) {
  std::vector<float> init(size_t(model.param_arena_floats()));
  std::vector<float> buffers(size_t(std::max<int64_t>(model.buffer_arena_floats(), 1)));
  model.initialize(init.data(), buffers.data(), 3);  // run_fusion's seed
  std::vector<float> out;
  for (const TensorSlot& t : model.params())
    if (folded_bias(t) == moved_biases)
      for (int64_t k = 0; k < t.shape.numel(); ++k)
        out.push_back(params[size_t(t.offset + k)] - init[size_t(t.offset + k)]);
  return out;
}

// a: folded, b: not. fp32: the weights, gammas and betas move alike, and so do the losses, running
// statistics and eval outputs (a training-mode batchnorm's output does not depend on the bias
// before it; the running mean and eval normalization carry it), within 1e-5. The folded biases do
// not move (their gradient is 0; SGD with momentum, no decay); the unfolded ones move by their
// gradient's rounding noise.
void compare(const Model& model, const FusionRun& a, const FusionRun& b) {
  const double tol = 1e-5;
  const double dp = rel_error(moved(model, a.params), moved(model, b.params));
  const std::vector<float> biases = moved(model, a.params, true);
  const double dbias = rel_error(moved(model, b.params, true), std::vector<float>(biases.size(), 0.f));
  const double db = rel_error(a.buffers, b.buffers), dout = rel_error(a.out, b.out);
  INFO("updates rel " << dp << ", unfolded biases moved " << dbias << ", running statistics rel " << db
                      << ", predictions rel " << dout);
  std::cout << "bias fold fp32: updates rel " << dp << ", unfolded biases moved " << dbias
            << ", running statistics " << db << ", predictions " << dout << "\n";
  CHECK(dp < tol);
  CHECK(biases == std::vector<float>(biases.size(), 0.f));
  CHECK(db < tol);
  CHECK(dout < tol);
  CHECK(std::abs(a.train.loss_sum - b.train.loss_sum) <= tol * std::abs(b.train.loss_sum));
  CHECK(std::abs(a.eval.loss_sum - b.eval.loss_sum) <= tol * std::abs(b.eval.loss_sum));
}

// 16 bits: two 16-bit runs part ways by more than rounding (pooling maxima and relu boundaries
// flip with it), so each is held to fp32 (f32, folded): the folded run's updates and eval outputs
// are about as close to fp32's as the unfolded run's (within twice, plus 0.05), its training loss
// within 2e-2 of the unfolded run's, and its folded biases do not move.
void compare_16(const Model& model, const FusionRun& a, const FusionRun& b, const FusionRun& f32) {
  const std::vector<float> ref = moved(model, f32.params);
  const double uf = rel_error(moved(model, a.params), ref), uu = rel_error(moved(model, b.params), ref);
  const double pf = rel_error(a.out, f32.out), pu = rel_error(b.out, f32.out);
  INFO("against fp32: updates folded " << uf << ", unfolded " << uu << "; predictions folded " << pf
                                       << ", unfolded " << pu);
  std::cout << "bias fold 16-bit against fp32: updates folded " << uf << ", unfolded " << uu
            << "; predictions folded " << pf << ", unfolded " << pu << "\n";
  CHECK(uf <= 2 * uu + 0.05);
  CHECK(pf <= 2 * pu + 0.05);
  const std::vector<float> biases = moved(model, a.params, true);
  CHECK(biases == std::vector<float>(biases.size(), 0.f));
  CHECK(std::abs(a.train.loss_sum - b.train.loss_sum) <= 2e-2 * std::abs(b.train.loss_sum));
}

}  // namespace

TEST_CASE("gpu batchnorm takes the bias of the convolution or dense layer before it", "[gpu][fusion][fold]") {
  Config c = parse_config(kNet, "fold.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  for (bool plain : {true, false}) {
    const FusionRun f32 =
        run_fusion(cuda_backend(), model, MathMode::strict_fp32, plain, nullptr, true, true);
    for (MathMode math : {MathMode::strict_fp32, MathMode::bf16, MathMode::fp16}) {
      if (math != MathMode::strict_fp32 && !gpu_has_math(math)) continue;
      INFO(math_name(math) << (plain ? ", NCHW" : ", backend layouts"));
      const FusionRun a = run_fusion(cuda_backend(), model, math, plain, nullptr, true, true);
      const FusionRun b = run_fusion(cuda_backend(), model, math, plain, nullptr, true, false);
      CHECK(a.folded == 3);
      CHECK(b.folded == 0);
      if (math == MathMode::strict_fp32)
        compare(model, a, b);
      else
        compare_16(model, a, b, f32);
    }
  }
}

TEST_CASE("gpu synchronized batchnorm takes the bias of the layer before it",
          "[gpu][nccl][sync_batchnorm][fold]") {
  CudaBackend& be = cuda_backend();
  if (!be.collectives_unavailable().empty()) {
    std::cout << "SKIPPED: " << be.collectives_unavailable() << "\n";
    return;
  }
  std::unique_ptr<DeviceCollective> one = be.join_collective(be.make_collective_id(), 0, 1);
  Config c = parse_config(kNet, "fold.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  const FusionRun f32 = run_fusion(be, model, MathMode::strict_fp32, false, one.get(), true, true);
  for (MathMode math : {MathMode::strict_fp32, MathMode::bf16}) {
    if (math != MathMode::strict_fp32 && !gpu_has_math(math)) continue;
    INFO(math_name(math));
    const FusionRun a = run_fusion(be, model, math, false, one.get(), true, true);
    const FusionRun b = run_fusion(be, model, math, false, one.get(), true, false);
    CHECK(a.folded == 3);
    if (math == MathMode::strict_fp32)
      compare(model, a, b);
    else
      compare_16(model, a, b, f32);
  }
}

TEST_CASE("gpu batchnorm leaves a bias that another layer also reads", "[gpu][fusion][fold]") {
  Config c = parse_config(kKept, "kept.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  for (MathMode math : {MathMode::strict_fp32, MathMode::bf16}) {
    if (math != MathMode::strict_fp32 && !gpu_has_math(math)) continue;
    INFO(math_name(math));
    const FusionRun a = run_fusion(cuda_backend(), model, math, false, nullptr, true, true);
    const FusionRun b = run_fusion(cuda_backend(), model, math, false, nullptr, true, false);
    CHECK(a.folded == 0);
    CHECK(a.params == b.params);  // nothing folded: the same run
    CHECK(a.out == b.out);
  }
}
