// Optimizer updates against values computed by hand from the published formulas
// (torch.optim.SGD / Adam / AdamW / RMSprop, Keras Nadam), three steps each, in double.
#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "lib/optim/optimizer.h"

using namespace trainer;

namespace {

// Runs `steps` updates of one parameter with the gradient sequence g, through the Optimizer and
// the CPU backend, and returns the parameter after each step.
std::vector<double> run(OptimizerConfig c, double w0, const std::vector<double>& g) {
  CpuBackend be;
  Optimizer opt(c);
  float w = float(w0);
  std::vector<float> state(3, 0.f);
  StepScalars s;
  std::vector<double> out;
  for (size_t t = 0; t < g.size(); ++t) {
    float gi = float(g[t]);
    opt.prepare(s, int64_t(t + 1), float(c.lr));
    float* slots[] = {&state[0], &state[1], &state[2]};  // one float per state slot
    opt.step(be, &w, &gi, slots, 1, &s);
    out.push_back(w);
  }
  return out;
}

const std::vector<double> kGrads{0.5, -0.2, 0.8};

}  // namespace

TEST_CASE("sgd with momentum, dampening, nesterov and weight decay follows torch.optim.SGD", "[optim]") {
  OptimizerConfig c;
  c.type = "sgd";
  c.lr = 0.1;
  c.sgd.momentum = 0.9f;
  c.sgd.weight_decay = 0.01f;
  c.sgd.nesterov = true;
  double w = 1.0, buf = 0;
  std::vector<double> want;
  for (size_t t = 0; t < kGrads.size(); ++t) {
    double g = kGrads[t] + 0.01 * w;
    buf = t == 0 ? g : 0.9 * buf + g;
    w -= 0.1 * (g + 0.9 * buf);
    want.push_back(w);
  }
  auto got = run(c, 1.0, kGrads);
  for (size_t i = 0; i < want.size(); ++i) REQUIRE(got[i] == Approx(want[i]).epsilon(1e-6));

  c.sgd.nesterov = false;
  c.sgd.dampening = 0.5f;
  c.sgd.weight_decay = 0;
  w = 1.0;
  want.clear();
  for (size_t t = 0; t < kGrads.size(); ++t) {
    buf = t == 0 ? kGrads[t] : 0.9 * buf + 0.5 * kGrads[t];
    w -= 0.1 * buf;
    want.push_back(w);
  }
  got = run(c, 1.0, kGrads);
  for (size_t i = 0; i < want.size(); ++i) REQUIRE(got[i] == Approx(want[i]).epsilon(1e-6));
}

TEST_CASE("adam and adamw follow torch.optim.Adam / AdamW", "[optim]") {
  for (bool decoupled : {false, true}) {
    OptimizerConfig c;
    c.type = decoupled ? "adamw" : "adam";
    c.adam.variant = decoupled ? AdamVariant::adamw : AdamVariant::adam;
    c.lr = 0.01;
    c.adam.weight_decay = 0.1f;
    double w = 1.0, m = 0, v = 0;
    std::vector<double> want;
    for (size_t t = 1; t <= kGrads.size(); ++t) {
      double g = kGrads[t - 1];
      if (decoupled)
        w *= 1 - 0.01 * 0.1;
      else
        g += 0.1 * w;
      m = 0.9 * m + 0.1 * g;
      v = 0.999 * v + 0.001 * g * g;
      double bc1 = 1 - std::pow(0.9, double(t)), bc2 = 1 - std::pow(0.999, double(t));
      w -= 0.01 / bc1 * m / (std::sqrt(v) / std::sqrt(bc2) + 1e-8);
      want.push_back(w);
    }
    auto got = run(c, 1.0, kGrads);
    for (size_t i = 0; i < want.size(); ++i) REQUIRE(got[i] == Approx(want[i]).epsilon(1e-6));
  }
}

TEST_CASE("nadam follows Keras' Nadam with momentum decay", "[optim]") {
  OptimizerConfig c;
  c.type = "nadam";
  c.adam.variant = AdamVariant::nadam;
  c.lr = 0.002;
  c.adam.eps = 1e-7f;
  double w = 1.0, m = 0, v = 0, prod = 1;
  std::vector<double> want;
  auto mu = [](double t) { return 0.9 * (1 - 0.5 * std::pow(0.96, t * 0.004)); };
  for (size_t t = 1; t <= kGrads.size(); ++t) {
    double g = kGrads[t - 1];
    double u_t = mu(double(t)), u_next = mu(double(t + 1));
    prod *= u_t;
    double prod_next = prod * u_next;
    m = 0.9 * m + 0.1 * g;
    v = 0.999 * v + 0.001 * g * g;
    double m_hat = u_next * m / (1 - prod_next) + (1 - u_t) * g / (1 - prod);
    double v_hat = v / (1 - std::pow(0.999, double(t)));
    w -= 0.002 * m_hat / (std::sqrt(v_hat) + 1e-7);
    want.push_back(w);
  }
  auto got = run(c, 1.0, kGrads);
  for (size_t i = 0; i < want.size(); ++i) REQUIRE(got[i] == Approx(want[i]).epsilon(1e-6));
}

TEST_CASE("rmsprop follows torch.optim.RMSprop (centered, momentum)", "[optim]") {
  OptimizerConfig c;
  c.type = "rmsprop";
  c.lr = 0.01;
  c.rmsprop.centered = true;
  c.rmsprop.momentum = 0.5f;
  double w = 1.0, sq = 0, avg = 0, buf = 0;
  std::vector<double> want;
  for (double g : kGrads) {
    sq = 0.99 * sq + 0.01 * g * g;
    avg = 0.99 * avg + 0.01 * g;
    double denom = std::sqrt(sq - avg * avg) + 1e-8;
    buf = 0.5 * buf + g / denom;
    w -= 0.01 * buf;
    want.push_back(w);
  }
  auto got = run(c, 1.0, kGrads);
  for (size_t i = 0; i < want.size(); ++i) REQUIRE(got[i] == Approx(want[i]).epsilon(1e-5));
}
