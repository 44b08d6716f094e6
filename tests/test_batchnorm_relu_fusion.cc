// A relu that alone takes a batchnorm's output runs inside the batchnorm's kernel
// (KernelContext::fused_relu, Executor::fusable_relu): the model trains, evaluates and predicts
// exactly as the same model with an identity view between the two, which keeps them apart. The
// same holds for outputs written over their inputs' memory (Executor::overwritable_input).
#include <algorithm>
#include <catch2/catch.hpp>
#include <functional>
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
  int fused = 0, in_place = 0, shared_grads = 0;
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
  r.fused = ex.fused_activations();
  r.in_place = ex.outputs_in_place();
  r.shared_grads = ex.gradients_shared();
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

// Trains, evaluates and predicts with both models (plain and backend layouts): bit for bit the
// same results. check(a, b, plain) checks what else the plans should show.
void check_same_results(const std::string& layers_a, const std::string& layers_b, const Shape& input,
                        const std::function<void(const Run&, const Run&, bool)>& check) {
  const Model model_a(input, YAML::Load(layers_a), InitScheme::torch, "test");
  const Model model_b(input, YAML::Load(layers_b), InitScheme::torch, "test");
  REQUIRE(model_a.param_arena_floats() == model_b.param_arena_floats());
  for (bool plain : {true, false}) {
    INFO((plain ? "plain layouts" : "backend layouts"));
    const Run a = run(model_a, plain, 6), b = run(model_b, plain, 6);
    check(a, b, plain);
    // The same arithmetic in the same order: equal bit for bit.
    CHECK(a.loss == b.loss);
    CHECK(a.eval_loss == b.eval_loss);
    CHECK(a.grads == b.grads);
    CHECK(a.params == b.params);
    CHECK(a.buffers == b.buffers);
    CHECK(a.out == b.out);
  }
}

void check_fused_equals_unfused(const std::string& layers, const Shape& input, int expect_fused) {
  check_same_results(layers, unfused(layers), input, [&](const Run& a, const Run& b, bool) {
    CHECK(a.fused == expect_fused);
    CHECK(b.fused == 0);
  });
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
    CHECK(ex.fused_activations() == pairs);
  }
}

// In-place outputs (LayerKernel::may_overwrite_input, Executor::overwritable_input): the add takes
// the memory of the batchnorm's output (whose backward reads x, not y), the relu after it the add's.
// Identity views in front of both keep every output in its own memory; the results are the same bit
// for bit, and so are those of a batchnorm with a fused relu (which reads its y in backward) and
// of a relu whose input also goes elsewhere, which stay apart.
TEST_CASE(
    "a residual add writes over the batchnorm's output and its relu over the add's, with the same results",
    "[executor][in_place]") {
  const std::string shared = R"([
    {type: conv2d, filters: 8, kernel_size: 3, padding: same},
    {type: batchnorm},
    {type: relu, name: r0},
    {type: conv2d, filters: 8, kernel_size: 3, padding: same},
    {type: batchnorm, name: b1},
    {type: add, name: a1, inputs: [b1, r0]},
    {type: relu, name: r1},
    {type: conv2d, filters: 8, kernel_size: 3, padding: same},
    {type: batchnorm, name: b2},
    {type: add, inputs: [r1, b2]},
    {type: global_avg_pool},
    {type: dense, units: 10}])";
  std::string apart = shared;
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"inputs: [b1, r0]}", "inputs: [v1, r0]}"},
        {"{type: relu, name: r1}", "{type: identity, name: v2},\n    {type: relu, name: r1}"},
        {"{type: batchnorm, name: b1},", "{type: batchnorm, name: b1},\n    {type: identity, name: v1},"},
        {"inputs: [r1, b2]}", "inputs: [r1, v3]}"},
        {"{type: batchnorm, name: b2},", "{type: batchnorm, name: b2},\n    {type: identity, name: v3},"}}) {
    const size_t at = apart.find(from);
    REQUIRE(at != std::string::npos);
    apart.replace(at, from.size(), to);
  }
  check_same_results(shared, apart, Shape{2, 8, 8}, [](const Run& a, const Run& b, bool plain) {
    // a1 over b1, r1 over a1, the last add over b2 (its second input: r1 has two consumers).
    if (plain) CHECK(a.in_place == 3);
    CHECK(b.in_place == 0);
    // b1's and b2's gradients are their adds' output gradients (r0 and r1 have two consumers).
    if (plain) CHECK(a.shared_grads == 2);
    CHECK(b.shared_grads == 0);
    CHECK(a.fused == 1);
  });
}
