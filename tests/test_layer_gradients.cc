// Every layer's backward against central finite differences of its forward, on the CPU backend.
//
// Scalar objective: L = sum(y * r) for a fixed random r, computed in double from float outputs.
// Numeric: dL/dv = (L(v + h) - L(v - h)) / 2h with h = 1e-2 (1e-3 near kinks: relu, max pooling).
// Inputs are a shuffled grid of distinct values spaced >= 2/n apart, so no max-pool window holds
// a near tie and no relu input sits within h of its kink.
// Pass: |analytic - numeric| <= 2e-3 + 2e-2 * |numeric| for every input and parameter element.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "lib/model/param_layout.h"
#include "tests/test_util.h"

using namespace trainer;

namespace {

struct Harness {
  CpuBackend backend;
  std::unique_ptr<Layer> layer;
  std::unique_ptr<LayerKernel> kernel;
  StepScalars scalars;
  int64_t batch;
  std::vector<float> x, params, grads, buffers, y, r, dx;
  std::vector<char> workspace;

  Harness(const std::string& yaml, const Shape& in, int64_t b, uint64_t seed) : batch(b) {
    layer = test::make_layer(yaml, in);
    scalars.seed = 7;
    scalars.step = 3;
    KernelContext ctx;
    ctx.backend = &backend;
    ctx.batch = b;
    ctx.scalars = &scalars;
    kernel = Registry::global().make_kernel("cpu", *layer, ctx);
    const size_t n = size_t(b * in.numel());
    x.resize(n);
    SplitMix rng(seed);
    std::vector<size_t> perm(n);
    for (size_t i = 0; i < n; ++i) perm[i] = i;
    for (size_t i = n; i > 1; --i) std::swap(perm[i - 1], perm[rng.next() % i]);
    for (size_t i = 0; i < n; ++i) x[i] = -1.f + 2.f * (float(perm[i]) + 0.5f) / float(n);
    // The layer's slice of the parameter arena, laid out as the Model lays it out.
    int64_t arena = 1;
    for (const ParamSpec& p : layer->param_specs()) arena += param_slot_floats(p.shape.numel());
    params = test::random_vector(size_t(arena), seed + 1, -0.5f, 0.5f);
    grads.assign(params.size(), 0.f);
    buffers.assign(64, 0.f);
    workspace.resize(kernel->workspace_bytes() + 64);
    y.assign(size_t(b * layer->output_shape().numel()), 0.f);
    r = test::random_vector(y.size(), seed + 2);
    dx.assign(x.size(), 0.f);
    kernel->bind(params.data(), grads.data(), buffers.data(), workspace.data());
  }

  double objective() {
    kernel->forward(x.data(), y.data(), true);
    double L = 0;
    for (size_t i = 0; i < y.size(); ++i) L += double(y[i]) * double(r[i]);
    return L;
  }

  void analytic() {
    objective();
    kernel->backward(x.data(), y.data(), r.data(), dx.data());
  }

  // Checks d objective / d v[i] for every element of v (x or params) against `analytic`.
  void check(std::vector<float>& v, const std::vector<float>& analytic_grad, float h, const char* what) {
    for (size_t i = 0; i < analytic_grad.size(); ++i) {
      const float keep = v[i];
      v[i] = keep + h;
      double up = objective();
      v[i] = keep - h;
      double down = objective();
      v[i] = keep;
      double numeric = (up - down) / (2.0 * h);
      INFO(what << "[" << i << "] analytic " << analytic_grad[i] << " numeric " << numeric);
      REQUIRE(std::abs(analytic_grad[i] - numeric) <= 2e-3 + 2e-2 * std::abs(numeric));
    }
  }

  void check_all(float h) {
    analytic();
    std::vector<float> dx_a = dx, dp_a = grads;  // padding between tensors: zero on both sides
    check(x, dx_a, h, "dx");
    check(params, dp_a, h, "dparam");
  }
};

}  // namespace

TEST_CASE("dense backward matches finite differences", "[gradient]") {
  Harness(" {type: dense, units: 5}", Shape{7}, 3, 11).check_all(1e-2f);
  Harness(" {type: dense, units: 4, use_bias: false}", Shape{6}, 2, 12).check_all(1e-2f);
}

TEST_CASE("conv2d backward matches finite differences (valid, same, strided, no bias)", "[gradient]") {
  Harness("{type: conv2d, filters: 3, kernel_size: 3}", Shape{2, 6, 6}, 2, 21).check_all(1e-2f);
  Harness("{type: conv2d, filters: 2, kernel_size: 3, padding: same, strides: 2}", Shape{2, 7, 7}, 2, 22).check_all(1e-2f);
  Harness("{type: conv2d, filters: 2, kernel_size: [2, 3], use_bias: false}", Shape{1, 5, 6}, 2, 23).check_all(1e-2f);
}

TEST_CASE("maxpool2d and avgpool2d backward match finite differences", "[gradient]") {
  SECTION("max 2x2") { Harness("{type: maxpool2d, pool_size: 2}", Shape{2, 6, 6}, 2, 31).check_all(1e-3f); }
  SECTION("avg 2x2") { Harness("{type: avgpool2d, pool_size: 2}", Shape{2, 6, 6}, 2, 32).check_all(1e-2f); }
  SECTION("max 3x3 stride 2 same") { Harness("{type: maxpool2d, pool_size: 3, strides: 2, padding: same}", Shape{1, 7, 7}, 2, 33).check_all(1e-3f); }
}

TEST_CASE("activation backward matches finite differences", "[gradient]") {
  for (const char* t : {"relu", "sigmoid", "tanh", "gelu", "leaky_relu"}) {
    SECTION(t) {
      Harness(std::string("{type: ") + t + "}", Shape{3, 4}, 2, 41).check_all(1e-3f);
    }
  }
  SECTION("softmax") { Harness("{type: softmax}", Shape{6}, 3, 42).check_all(1e-2f); }
  SECTION("log_softmax") { Harness("{type: log_softmax}", Shape{6}, 3, 43).check_all(1e-2f); }
}

TEST_CASE("dropout and dropout2d backward match finite differences with the step's mask", "[gradient]") {
  Harness("{type: dropout, rate: 0.4}", Shape{10}, 3, 51).check_all(1e-2f);
  Harness("{type: dropout2d, rate: 0.5}", Shape{4, 3, 3}, 2, 52).check_all(1e-2f);
}

TEST_CASE("dropout keeps about 1-rate of the units and scales them and eval is the identity", "[layers]") {
  Harness h("{type: dropout, rate: 0.3}", Shape{1000}, 4, 61);
  h.kernel->forward(h.x.data(), h.y.data(), true);
  int kept = 0;
  for (size_t i = 0; i < h.y.size(); ++i) {
    if (h.y[i] != 0.f) {
      ++kept;
      REQUIRE(h.y[i] == Approx(h.x[i] / 0.7f));
    }
  }
  REQUIRE(kept / 4000.0 == Approx(0.7).margin(0.03));
  h.kernel->forward(h.x.data(), h.y.data(), false);
  REQUIRE(h.y == h.x);
}

TEST_CASE("dropout2d drops whole channels", "[layers]") {
  Harness h("{type: dropout2d, rate: 0.5}", Shape{8, 4, 4}, 4, 62);
  h.kernel->forward(h.x.data(), h.y.data(), true);
  for (int64_t c = 0; c < 32; ++c) {
    bool zero = h.y[size_t(c * 16)] == 0.f;
    for (int64_t i = 0; i < 16; ++i) REQUIRE((h.y[size_t(c * 16 + i)] == 0.f) == zero);
  }
}
