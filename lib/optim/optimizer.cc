#include "lib/optim/optimizer.h"

#include <cmath>

#include "lib/config/node_reader.h"

namespace trainer {

OptimizerConfig read_optimizer(NodeReader& r) {
  OptimizerConfig c;
  c.type = r.choice("type", "adam", {"sgd", "adam", "adamw", "nadam", "rmsprop"});
  const double big = 1e6;
  if (c.type == "sgd") {
    c.lr = r.number("lr", 0.01, 0, big);
    c.sgd.momentum = float(r.number("momentum", 0, 0, 1));
    c.sgd.dampening = float(r.number("dampening", 0, 0, 1));
    c.sgd.weight_decay = float(r.number("weight_decay", 0, 0, big));
    c.sgd.nesterov = r.boolean("nesterov", false);
    if (c.sgd.nesterov && (c.sgd.momentum <= 0 || c.sgd.dampening != 0))
      r.fail("nesterov", "needs momentum > 0 and dampening = 0 (as in PyTorch)");
  } else if (c.type == "rmsprop") {
    c.lr = r.number("lr", 0.01, 0, big);
    c.rmsprop.alpha = float(r.number("alpha", 0.99, 0, 1));
    c.rmsprop.eps = float(r.number("eps", 1e-8, 0, 1));
    c.rmsprop.momentum = float(r.number("momentum", 0, 0, 1));
    c.rmsprop.weight_decay = float(r.number("weight_decay", 0, 0, big));
    c.rmsprop.centered = r.boolean("centered", false);
  } else {
    const bool nadam = c.type == "nadam";
    c.adam.variant = nadam ? AdamVariant::nadam : c.type == "adamw" ? AdamVariant::adamw : AdamVariant::adam;
    c.lr = r.number("lr", nadam ? 0.001 : 0.001, 0, big);
    c.adam.beta1 = float(r.number("beta1", 0.9, 0, 0.999999));
    c.adam.beta2 = float(r.number("beta2", 0.999, 0, 0.999999999));
    c.adam.eps = float(r.number("eps", nadam ? 1e-7 : 1e-8, 0, 1));
    c.adam.weight_decay = float(r.number("weight_decay", c.type == "adamw" ? 0.01 : 0, 0, big));
  }
  return c;
}

void describe_optimizer(const OptimizerConfig& c, YAML::Node& o) {
  o["type"] = c.type;
  o["lr"] = c.lr;
  if (c.type == "sgd") {
    o["momentum"] = c.sgd.momentum;
    o["dampening"] = c.sgd.dampening;
    o["weight_decay"] = c.sgd.weight_decay;
    o["nesterov"] = c.sgd.nesterov;
  } else if (c.type == "rmsprop") {
    o["alpha"] = c.rmsprop.alpha;
    o["eps"] = c.rmsprop.eps;
    o["momentum"] = c.rmsprop.momentum;
    o["weight_decay"] = c.rmsprop.weight_decay;
    o["centered"] = c.rmsprop.centered;
  } else {
    o["beta1"] = c.adam.beta1;
    o["beta2"] = c.adam.beta2;
    o["eps"] = c.adam.eps;
    o["weight_decay"] = c.adam.weight_decay;
  }
}

int Optimizer::state_slots() const {
  if (c_.type == "sgd") return c_.sgd.momentum > 0 ? 1 : 0;
  if (c_.type == "rmsprop") return 3;  // square average, momentum buffer, centered average
  return 2;                            // first and second moments
}

void Optimizer::prepare(StepScalars& s, int64_t t, float lr) const {
  s.lr = lr;
  s.step = uint64_t(t - 1);
  const double b1 = c_.adam.beta1, b2 = c_.adam.beta2;
  s.bias_correction1 = float(1.0 - std::pow(b1, double(t)));
  s.bias_correction2 = float(1.0 - std::pow(b2, double(t)));
  if (c_.adam.variant == AdamVariant::nadam && c_.type == "nadam") {
    auto mu = [&](int64_t k) { return float(b1 * (1.0 - 0.5 * std::pow(0.96, double(k) * 0.004))); };
    if (t == 1) s.momentum_product = 1.f;
    s.mu_t = mu(t);
    s.mu_next = mu(t + 1);
    s.momentum_product *= s.mu_t;
  }
}

void Optimizer::step(Backend& b, float* w, const float* g, float* state, int64_t n,
                     const StepScalars* s) const {
  if (c_.type == "sgd") {
    b.sgd_step(c_.sgd, w, g, state, n, s);
  } else if (c_.type == "rmsprop") {
    b.rmsprop_step(c_.rmsprop, w, g, state, state + n, state + 2 * n, n, s);
  } else {
    b.adam_step(c_.adam, w, g, state, state + n, n, s);
  }
}

}  // namespace trainer
