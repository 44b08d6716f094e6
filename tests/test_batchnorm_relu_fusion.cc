// A relu that alone takes a batchnorm's output runs inside the batchnorm's kernel
// (KernelContext::fused_relu, Executor::fusable_relu): the model trains, evaluates and predicts
// exactly as the same model with an identity view between the two, which keeps them apart.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>

#include "kernels/cpu/cpu_backend.h"
#include "lib/config/config.h"
#include "lib/model/executor.h"
#include "lib/model/model.h"
#include "tests/test_util.h"

using namespace trainer;

namespace {

constexpr int64_t kClasses = 10;

struct Run {
  std::vector<float> out, grads, params, buffers;
  double loss = 0, eval_loss = 0;
  int fused = 0;
};

// Three SGD steps with momentum on one batch (training statistics), then an evaluation and a
// prediction (running statistics).
Run run(const Model& model, bool plain, int64_t batch) {
  std::vector<float> params(size_t(model.param_arena_floats())),
      buffers(size_t(std::max<int64_t>(model.buffer_arena_floats(), 1)));
  model.initialize(params.data(), buffers.data(), 7);
  const auto x = test::random_vector(size_t(batch * model.input_shape().numel()), 5);
  std::vector<int32_t> y(static_cast<size_t>(batch));
  for (size_t i = 0; i < y.size(); ++i) y[i] = int32_t((i * 7) % kClasses);
  CpuBackend backend;
  OptimizerConfig oc;
  oc.type = "sgd";
  oc.hyper.set("momentum", 0.9);
  Optimizer opt(oc);
  ExecutorOptions eo = test::classifier_options({batch}, kClasses);
  eo.plain_layouts = plain;
  Executor ex(model, backend, opt, eo);
  Run r;
  r.fused = ex.fused_relus();
  ex.upload_params(params.data(), buffers.data());
  ex.set_gradient_hook([&](float* g) { r.grads.assign(g, g + model.param_arena_floats()); });
  for (int t = 1; t <= 3; ++t) ex.train_step(batch, x.data(), y.data(), t, 0.05f);
  r.loss = ex.read_metrics().loss_sum;
  ex.reset_metrics();
  ex.eval_step(batch, x.data(), y.data());
  r.eval_loss = ex.read_metrics().loss_sum;
  r.out.resize(size_t(batch * kClasses));
  ex.predict(batch, x.data(), r.out.data());
  r.params.resize(params.size());
  r.buffers.resize(buffers.size());
  ex.download_params(r.params.data(), r.buffers.data());
  return r;
}

// `layers` with every relu right after a batchnorm kept apart from it by an identity view.
std::string unfused(std::string layers) {
  const std::string pair = "{type: batchnorm},\n    {type: relu";
  for (size_t at = layers.find(pair); at != std::string::npos; at = layers.find(pair, at + 1))
    layers.replace(at, pair.size(), "{type: batchnorm},\n    {type: identity},\n    {type: relu");
  return layers;
}

void check_fused_equals_unfused(const std::string& layers, const Shape& input, int expect_fused) {
  const Model fused_model(input, YAML::Load(layers), InitScheme::torch, "test");
  const Model unfused_model(input, YAML::Load(unfused(layers)), InitScheme::torch, "test");
  REQUIRE(fused_model.param_arena_floats() == unfused_model.param_arena_floats());
  for (bool plain : {true, false}) {
    INFO((plain ? "plain layouts" : "backend layouts"));
    const Run a = run(fused_model, plain, 6), b = run(unfused_model, plain, 6);
    CHECK(a.fused == expect_fused);
    CHECK(b.fused == 0);
    // The same arithmetic in the same order: equal bit for bit.
    CHECK(a.loss == b.loss);
    CHECK(a.eval_loss == b.eval_loss);
    CHECK(a.grads == b.grads);
    CHECK(a.params == b.params);
    CHECK(a.buffers == b.buffers);
    CHECK(a.out == b.out);
  }
}

}  // namespace

TEST_CASE("a relu after a batchnorm runs inside it and trains exactly as the separate layers",
          "[executor][fusion]") {
  // The first pair takes the model's input (no input gradient), the second a convolution's
  // blocked output and hands its own on to pooling, the third must give flatten a plain output.
  check_fused_equals_unfused(R"([
    {type: batchnorm},
    {type: relu},
    {type: conv2d, filters: 10, kernel_size: 3},
    {type: batchnorm},
    {type: relu},
    {type: maxpool2d, pool_size: 2},
    {type: conv2d, filters: 20, kernel_size: 3},
    {type: batchnorm},
    {type: relu},
    {type: flatten},
    {type: dense, units: 10}])",
                             Shape{3, 14, 14}, 3);
}

TEST_CASE("a fused relu's output may feed several layers, and their gradients are summed",
          "[executor][fusion]") {
  // A residual block: the relu's output is both the convolution's input and the shortcut.
  check_fused_equals_unfused(R"([
    {type: conv2d, filters: 8, kernel_size: 3, padding: same},
    {type: batchnorm},
    {type: relu, name: r0},
    {type: conv2d, filters: 8, kernel_size: 3, padding: same},
    {type: batchnorm},
    {type: relu, name: r1},
    {type: add, inputs: [r1, r0]},
    {type: global_avg_pool},
    {type: dense, units: 10}])",
                             Shape{2, 8, 8}, 2);
}

TEST_CASE("a batchnorm whose output another layer also reads keeps its relu separate", "[executor][fusion]") {
  const Model model(Shape{2, 8, 8}, YAML::Load(R"([
    {type: conv2d, filters: 8, kernel_size: 3, padding: same},
    {type: batchnorm, name: bn},
    {type: relu, name: r},
    {type: add, inputs: [r, bn]},
    {type: batchnorm},
    {type: sigmoid},
    {type: flatten},
    {type: dense, units: 10}])"),
                    InitScheme::torch, "test");
  const Run r = run(model, false, 4);
  CHECK(r.fused == 0);
}

TEST_CASE("the shipped batchnorm networks fuse every batchnorm that only a relu reads",
          "[executor][fusion]") {
  // vgg11_bn_cifar: eight conv-batchnorm-relu blocks; resnet18_cifar: the stem's pair and the
  // first pair of each of the eight blocks (the second batchnorm feeds the shortcut's add).
  for (const auto& [name, pairs] :
       {std::pair<std::string, int>{"vgg11_bn_cifar.yaml", 8}, {"resnet18_cifar.yaml", 9}}) {
    INFO(name);
    const Config c = load_config(std::string(TRAINER_SOURCE_DIR) + "/configs/" + name, {});
    const Model model(c.input_shape, c.layers, c.init, c.file, c.blocks);
    CpuBackend backend;
    const Optimizer opt{OptimizerConfig{}};
    Executor ex(model, backend, opt, test::classifier_options({2}, 10));
    CHECK(ex.fused_relus() == pairs);
  }
}
