// Blocked layouts between CPU kernels (oneDNN nChw16c/nChw8c, channels padded: 10 -> 16, 20 ->
// 24/32) give the same forward and backward results as plain layouts everywhere.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <string>

#include "kernels/cpu/cpu_backend.h"
#include "lib/model/executor.h"
#include "lib/model/model.h"
#include "lib/registry/registry.h"
#include "tests/test_util.h"

using namespace trainer;

namespace {

struct Run {
  std::vector<float> out, grads, params;
  double loss = 0;
};

Run run(const Model& model, bool plain, const std::vector<float>& p0, const std::vector<float>& x,
        const std::vector<int32_t>& y, int64_t batch) {
  CpuBackend backend;
  OptimizerConfig oc;
  oc.type = "sgd";
  Optimizer opt(oc);
  ExecutorOptions eo = test::classifier_options({batch}, 10);
  eo.plain_layouts = plain;
  Executor ex(model, backend, opt, eo);
  std::vector<float> buf(size_t(std::max<int64_t>(model.buffer_arena_floats(), 1)));
  ex.upload_params(p0.data(), buf.data());
  Run r;
  r.out.resize(size_t(batch * 10));
  ex.predict(batch, x.data(), r.out.data());
  ex.set_gradient_hook([&](float* g) { r.grads.assign(g, g + model.param_arena_floats()); });
  for (int t = 1; t <= 2; ++t) ex.train_step(batch, x.data(), y.data(), t, 0.05f);
  r.loss = ex.read_metrics().loss_sum;
  r.params.resize(p0.size());
  ex.download_params(r.params.data(), buf.data());
  return r;
}

void require_close(const std::vector<float>& a, const std::vector<float>& b, double rel) {
  REQUIRE(a.size() == b.size());
  double scale = 0, diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    scale = std::max(scale, double(std::fabs(b[i])));
    diff = std::max(diff, double(std::fabs(a[i] - b[i])));
  }
  INFO("max |a-b| " << diff << " scale " << scale);
  REQUIRE(scale > 0);
  REQUIRE(diff <= rel * scale);
}

// The model's first layer is a convolution with 10 filters (padded in blocked layouts); classes: 10.
void check_blocked_equals_plain(const Model& model) {
  const int64_t batch = 4;
  std::vector<float> p0(size_t(model.param_arena_floats())),
      buf(size_t(std::max<int64_t>(model.buffer_arena_floats(), 1)));
  model.initialize(p0.data(), buf.data(), 7);
  auto x = test::random_vector(size_t(batch * model.input_shape().numel()), 5);
  std::vector<int32_t> y{0, 3, 7, 9};
  Run plain = run(model, true, p0, x, y, batch);
  Run blocked = run(model, false, p0, x, y, batch);
  // The blocked run really is blocked: the first convolution, free to choose, keeps oneDNN's
  // blocked layout with 10 channels padded (on machines with AVX2 or AVX-512).
  {
    CpuBackend backend;
    KernelContext ctx;
    ctx.backend = &backend;
    ctx.batch = batch;
    ctx.output_layout_free = true;
    auto k = Registry::global().make_kernel("cpu", *model.layers()[0], ctx);
    const std::string isa = CpuBackend::cpu_isa();
    if (isa == "generic" || isa == "sse4.1" || isa == "avx") {
      WARN("oneDNN may keep plain layouts on a CPU with " << isa << "; the blocked-layout check is skipped");
    } else {
      CHECK(k->output_layout() != nullptr);
      CHECK(k->output_bytes() > size_t(batch * model.layers()[0]->output_shape().numel()) * sizeof(float));
    }
    ctx.output_layout_free = false;
    auto plain_k = Registry::global().make_kernel("cpu", *model.layers()[0], ctx);
    CHECK(plain_k->output_layout() == nullptr);
  }
  require_close(blocked.out, plain.out, 1e-5);
  require_close(blocked.grads, plain.grads, 1e-5);
  require_close(blocked.params, plain.params, 1e-5);
  REQUIRE(std::fabs(blocked.loss - plain.loss) <= 1e-5 * std::fabs(plain.loss));
  // Determinism: the same run again gives identical results.
  Run again = run(model, false, p0, x, y, batch);
  REQUIRE(again.grads == blocked.grads);
  REQUIRE(again.loss == blocked.loss);
}

}  // namespace

TEST_CASE("blocked layouts between conv, relu and pooling equal plain layouts, forward and backward",
          "[executor][layout]") {
  // sigmoid and gelu do not map 0 to 0: the channels' padding must still hold zeros.
  const std::string act = GENERATE(as<std::string>(), "relu", "sigmoid", "gelu", "leaky_relu");
  INFO("activation " << act);
  const YAML::Node layers = YAML::Load(R"([
    {type: conv2d, filters: 10, kernel_size: 3},
    {type: )" + act + R"(},
    {type: maxpool2d, pool_size: 2},
    {type: conv2d, filters: 20, kernel_size: 3, padding: same},
    {type: )" + act + R"(},
    {type: avgpool2d, pool_size: 2},
    {type: flatten},
    {type: dense, units: 10}])");
  check_blocked_equals_plain(Model(Shape{3, 14, 14}, layers, InitScheme::torch, "test"));
}

TEST_CASE("blocked layouts between conv1d, relu and 1-D pooling equal plain layouts, forward and backward",
          "[executor][layout]") {
  const YAML::Node layers = YAML::Load(R"([
    {type: conv1d, filters: 10, kernel_size: 3},
    {type: relu},
    {type: maxpool1d, pool_size: 2},
    {type: conv1d, filters: 20, kernel_size: 3, padding: same},
    {type: relu},
    {type: avgpool1d, pool_size: 2},
    {type: flatten},
    {type: dense, units: 10}])");
  check_blocked_equals_plain(Model(Shape{3, 30}, layers, InitScheme::torch, "test"));
}

TEST_CASE("dropout2d in blocked and channels-last layouts equals plain, forward and backward",
          "[executor][layout]") {
  // The first convolution keeps nChw16c (10 channels padded to 16), the second (10 input
  // channels) runs channels-last; dropout2d works in whichever layout it is given, and the last
  // one hands a plain output to flatten.
  const YAML::Node layers = YAML::Load(R"([
    {type: conv2d, filters: 10, kernel_size: 3},
    {type: dropout2d, rate: 0.5},
    {type: maxpool2d, pool_size: 2},
    {type: relu},
    {type: conv2d, filters: 20, kernel_size: 3},
    {type: dropout2d, rate: 0.3},
    {type: maxpool2d, pool_size: 2},
    {type: relu},
    {type: conv2d, filters: 12, kernel_size: 1},
    {type: dropout2d, rate: 0.4},
    {type: flatten},
    {type: dense, units: 10}])");
  check_blocked_equals_plain(Model(Shape{1, 22, 22}, layers, InitScheme::torch, "test"));
}

TEST_CASE("batchnorm in blocked and channels-last layouts equals plain, forward and backward",
          "[executor][layout]") {
  // The first batchnorm gets the first convolution's nChw16c (10 channels padded to 16) and hands
  // it on to relu; the second gets the channels-last output of the second convolution and must
  // give flatten a plain output.
  const YAML::Node layers = YAML::Load(R"([
    {type: conv2d, filters: 10, kernel_size: 3},
    {type: batchnorm},
    {type: relu},
    {type: maxpool2d, pool_size: 2},
    {type: conv2d, filters: 20, kernel_size: 3},
    {type: batchnorm},
    {type: flatten},
    {type: dense, units: 10}])");
  check_blocked_equals_plain(Model(Shape{1, 14, 14}, layers, InitScheme::torch, "test"));
}
