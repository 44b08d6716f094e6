// The finite-difference gradient harness of the CPU layer tests: one layer, its CPU kernel, and
// its backward checked against central differences of its forward.
//
// Scalar objective: L = sum(y * r) for a fixed random r, computed in double from float outputs.
// Numeric: dL/dv = (L(v + h) - L(v - h)) / 2h, with h chosen by the test.
// Inputs are a shuffled grid of distinct values spaced >= 2/n apart, so no max-pool window holds
// a near tie and no relu input sits within h of its kink.
// Parameters are laid out the way Model lays out its arena (each tensor in a 64-float slot), so
// the kernels' offsets are exercised too; buffers start at their specs' initial values.
// Pass: |analytic - numeric| <= 2e-3 + 2e-2 * |numeric| for every element checked.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "lib/model/param_layout.h"
#include "tests/test_util.h"

namespace trainer::test {

struct GradientHarness {
  CpuBackend backend;
  std::unique_ptr<Layer> layer;
  std::unique_ptr<LayerKernel> kernel;
  StepScalars scalars;  // seed and step: where dropout's mask comes from
  bool training = true;
  // false: dparam is checked on the tensors' elements only (`live`), not on the slots' padding.
  bool check_padding = true;
  std::vector<float> x, params, grads, buffers, y, r, dx;
  std::vector<size_t> live;  // parameter elements (the slots' padding excluded)
  std::vector<char> workspace;

  GradientHarness(const std::string& yaml, const Shape& in, int64_t b, uint64_t seed) {
    layer = make_layer(yaml, in);
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
    // The layer's slice of the parameter arena, and one float more (a layer may have none).
    int64_t off = 0;
    for (const ParamSpec& p : layer->param_specs()) {
      for (int64_t i = 0; i < p.shape.numel(); ++i) live.push_back(size_t(off + i));
      off += param_slot_floats(p.shape.numel());
    }
    params = random_vector(size_t(off + 1), seed + 1, -0.5f, 0.5f);
    grads.assign(params.size(), 0.f);
    for (const BufferSpec& s : layer->buffer_specs())
      buffers.insert(buffers.end(), size_t(s.shape.numel()), s.init);
    buffers.resize(buffers.size() + 64, 0.f);
    workspace.resize(kernel->workspace_bytes() + 64);
    y.assign(size_t(b * layer->output_shape().numel()), 0.f);
    r = random_vector(y.size(), seed + 2);
    dx.assign(x.size(), 0.f);
    kernel->bind(params.data(), grads.data(), buffers.data(), workspace.data());
  }

  double objective() {
    kernel->forward(x.data(), y.data(), training);
    double L = 0;
    for (size_t i = 0; i < y.size(); ++i) L += double(y[i]) * double(r[i]);
    return L;
  }

  // The kernel's gradients of the objective into dx and grads.
  void analytic() {
    objective();
    kernel->backward(x.data(), y.data(), r.data(), dx.data());
  }

  // Checks d objective / d v[i] for each i in `at` (of x or params) against `analytic_grad`.
  void check(std::vector<float>& v, const std::vector<float>& analytic_grad, const std::vector<size_t>& at,
             float h, const char* what) {
    for (size_t i : at) {
      const float keep = v[i];
      v[i] = keep + h;
      const double up = objective();
      v[i] = keep - h;
      const double down = objective();
      v[i] = keep;
      const double numeric = (up - down) / (2.0 * h);
      INFO(what << "[" << i << "] analytic " << analytic_grad[i] << " numeric " << numeric);
      REQUIRE(std::abs(analytic_grad[i] - numeric) <= 2e-3 + 2e-2 * std::abs(numeric));
    }
  }

  // with_dx false: the input is not differentiable (token ids); dx must then be all zeros.
  void check_all(float h, bool with_dx = true) {
    analytic();
    const std::vector<float> dx_a = dx, dp_a = grads;  // padding between tensors: zero on both sides
    if (with_dx) {
      check(x, dx_a, indices(x.size()), h, "dx");
    } else {
      for (float v : dx_a) REQUIRE(v == 0.f);
    }
    check(params, dp_a, check_padding ? indices(params.size()) : live, h, "dparam");
  }

  static std::vector<size_t> indices(size_t n) {
    std::vector<size_t> all(n);
    for (size_t i = 0; i < n; ++i) all[i] = i;
    return all;
  }
};

}  // namespace trainer::test
