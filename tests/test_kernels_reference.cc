// oneDNN forward results against naive double-precision reference implementations.
// Bound: max |onednn - reference| <= 1e-4 * (1 + |reference|).
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "lib/layers/conv2d.h"
#include "lib/layers/pool2d.h"
#include "lib/model/param_layout.h"
#include "tests/test_util.h"

using namespace trainer;

namespace {

std::vector<float> run_forward(const Layer& layer, int64_t B, std::vector<float>& x, std::vector<float>& params) {
  CpuBackend backend;
  StepScalars s;
  KernelContext ctx;
  ctx.backend = &backend;
  ctx.batch = B;
  ctx.scalars = &s;
  auto k = Registry::global().make_kernel("cpu", layer, ctx);
  std::vector<float> grads(params.size() + 1);
  std::vector<char> ws(k->workspace_bytes() + 1);
  k->bind(params.data(), grads.data(), nullptr, ws.data());
  std::vector<float> y(size_t(B * layer.output_shape().numel()));
  k->forward(x.data(), y.data(), false);
  return y;
}

void require_close(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i);
    REQUIRE(std::abs(got[i] - want[i]) <= 1e-4 * (1 + std::abs(want[i])));
  }
}

}  // namespace

TEST_CASE("conv2d forward equals a direct convolution", "[reference]") {
  const char* cases[] = {"{type: conv2d, filters: 4, kernel_size: 3}",
                         "{type: conv2d, filters: 3, kernel_size: 3, padding: same, strides: 2}",
                         "{type: conv2d, filters: 2, kernel_size: [3, 2], padding: 1}"};
  for (const char* yaml : cases) {
    auto layer = test::make_layer(yaml, Shape{3, 9, 8});
    const auto& c = static_cast<const Conv2d&>(*layer);
    const int64_t B = 2, C = 3, H = 9, W = 8, F = c.filters, OH = c.output_shape()[1], OW = c.output_shape()[2];
    auto x = test::random_vector(size_t(B * C * H * W), 1);
    const int64_t bias_at = param_slot_floats(F * C * c.kh * c.kw);
    auto p = test::random_vector(size_t(bias_at + F), 2);
    auto y = run_forward(c, B, x, p);
    std::vector<double> ref(y.size());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t f = 0; f < F; ++f)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            double acc = c.use_bias ? p[size_t(bias_at + f)] : 0.0;
            for (int64_t ch = 0; ch < C; ++ch)
              for (int64_t i = 0; i < c.kh; ++i)
                for (int64_t j = 0; j < c.kw; ++j) {
                  int64_t ih = oh * c.sh - c.wh.pad_begin + i, iw = ow * c.sw - c.ww.pad_begin + j;
                  if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                  acc += double(x[size_t(((b * C + ch) * H + ih) * W + iw)]) *
                         p[size_t(((f * C + ch) * c.kh + i) * c.kw + j)];
                }
            ref[size_t(((b * F + f) * OH + oh) * OW + ow)] = acc;
          }
    INFO(yaml);
    require_close(y, ref);
  }
}

TEST_CASE("maxpool2d and avgpool2d forward equal direct pooling", "[reference]") {
  for (const char* yaml : {"{type: maxpool2d, pool_size: 2}", "{type: avgpool2d, pool_size: 3, strides: 2}"}) {
    auto layer = test::make_layer(yaml, Shape{2, 7, 7});
    const auto& pl = static_cast<const Pool2d&>(*layer);
    const int64_t B = 2, C = 2, H = 7, W = 7, OH = pl.output_shape()[1], OW = pl.output_shape()[2];
    auto x = test::random_vector(size_t(B * C * H * W), 3);
    std::vector<float> none;
    auto y = run_forward(pl, B, x, none);
    std::vector<double> ref;
    for (int64_t bc = 0; bc < B * C; ++bc)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double mx = -1e30, sum = 0;
          for (int64_t i = 0; i < pl.ph; ++i)
            for (int64_t j = 0; j < pl.pw; ++j) {
              double v = x[size_t((bc * H + oh * pl.sh + i) * W + ow * pl.sw + j)];
              mx = std::max(mx, v);
              sum += v;
            }
          ref.push_back(pl.kind == Pool2d::Kind::max ? mx : sum / double(pl.ph * pl.pw));
        }
    INFO(yaml);
    require_close(y, ref);
  }
}

TEST_CASE("dense forward equals x W^T + b", "[reference]") {
  auto layer = test::make_layer("{type: dense, units: 6}", Shape{5});
  auto x = test::random_vector(15, 4);
  auto p = test::random_vector(size_t(param_slot_floats(30) + 6), 5);  // weight slot, then bias
  auto y = run_forward(*layer, 3, x, p);
  std::vector<double> ref;
  for (int b = 0; b < 3; ++b)
    for (int u = 0; u < 6; ++u) {
      double acc = p[size_t(param_slot_floats(30) + u)];
      for (int i = 0; i < 5; ++i) acc += double(x[size_t(b * 5 + i)]) * p[size_t(u * 5 + i)];
      ref.push_back(acc);
    }
  require_close(y, ref);
}

TEST_CASE("softmax, log_softmax and the element-wise activations equal their formulas", "[reference]") {
  auto x = test::random_vector(12, 6, -3.f, 3.f);
  std::vector<float> none;
  auto sm = run_forward(*test::make_layer("{type: softmax}", Shape{4}), 3, x, none);
  auto lsm = run_forward(*test::make_layer("{type: log_softmax}", Shape{4}), 3, x, none);
  std::vector<double> ref_sm, ref_lsm;
  for (int b = 0; b < 3; ++b) {
    double z = 0;
    for (int c = 0; c < 4; ++c) z += std::exp(double(x[size_t(b * 4 + c)]));
    for (int c = 0; c < 4; ++c) {
      ref_sm.push_back(std::exp(double(x[size_t(b * 4 + c)])) / z);
      ref_lsm.push_back(double(x[size_t(b * 4 + c)]) - std::log(z));
    }
  }
  require_close(sm, ref_sm);
  require_close(lsm, ref_lsm);
  struct { const char* yaml; double (*f)(double); } acts[] = {
      {"{type: relu}", [](double v) { return v > 0 ? v : 0.0; }},
      {"{type: sigmoid}", [](double v) { return 1 / (1 + std::exp(-v)); }},
      {"{type: tanh}", [](double v) { return std::tanh(v); }},
      {"{type: gelu}", [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
      {"{type: leaky_relu}", [](double v) { return v > 0 ? v : 0.01 * v; }}};
  for (const auto& a : acts) {
    auto y = run_forward(*test::make_layer(a.yaml, Shape{4}), 3, x, none);
    std::vector<double> ref;
    for (float v : x) ref.push_back(a.f(v));
    INFO(a.yaml);
    require_close(y, ref);
  }
}
