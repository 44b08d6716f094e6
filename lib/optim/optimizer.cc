#include "lib/optim/optimizer.h"

#include <cmath>

#include "lib/config/key_spec.h"

namespace trainer {

// Every optimizer type and its keys; the defaults follow PyTorch (Nadam's eps follows Keras).
const KeyVariants& optimizer_keys() {
  static const KeyVariants variants = [] {
    const double big = 1e6;
    const KeySpec scale_lr =
        choice_key("scale_lr", "none", {"none", "linear"},
                   "linear: lr times the data-parallel replicas or ranks (none: as given)");
    const auto adam_like = [&](double eps, double weight_decay, const std::string& decay_doc) {
      return KeySpecs{number_key("lr", 0.001, 0, big, "learning rate"),
                      scale_lr,
                      number_key("beta1", 0.9, 0, 0.999999, "decay of the first moment"),
                      number_key("beta2", 0.999, 0, 0.999999999, "decay of the second moment"),
                      number_key("eps", eps, 0, 1, "added to the denominator"),
                      number_key("weight_decay", weight_decay, 0, big, decay_doc)};
    };
    return KeyVariants{
        {"sgd",
         {number_key("lr", 0.01, 0, big, "learning rate"), scale_lr,
          number_key("momentum", 0, 0, 1, "momentum factor"),
          number_key("dampening", 0, 0, 1, "dampening of the momentum"),
          number_key("weight_decay", 0, 0, big, "L2 penalty added to the gradient"),
          bool_key("nesterov", false, "Nesterov momentum (needs momentum > 0, dampening 0)")},
         "stochastic gradient descent with momentum (torch.optim.SGD)"},
        {"adam", adam_like(1e-8, 0, "L2 penalty added to the gradient"), "Adam (torch.optim.Adam)"},
        {"adamw", adam_like(1e-8, 0.01, "decoupled weight decay"),
         "Adam with decoupled weight decay (torch.optim.AdamW)"},
        {"nadam", adam_like(1e-7, 0, "L2 penalty added to the gradient"),
         "Adam with Nesterov momentum (Keras Nadam)"},
        {"rmsprop",
         {number_key("lr", 0.01, 0, big, "learning rate"), scale_lr,
          number_key("alpha", 0.99, 0, 1, "decay of the squared average"),
          number_key("eps", 1e-8, 0, 1, "added to the denominator"),
          number_key("momentum", 0, 0, 1, "momentum factor"),
          number_key("weight_decay", 0, 0, big, "L2 penalty added to the gradient"),
          bool_key("centered", false, "normalize by the centered second moment")},
         "RMSprop (torch.optim.RMSprop)"},
    };
  }();
  return variants;
}

OptimizerConfig read_optimizer(NodeReader& r) {
  const KeyValues v = read_variant(r, "type", kDefaultOptimizer, optimizer_keys());
  OptimizerConfig c;
  c.type = v.string("type");
  c.lr = v.number("lr");
  c.scale_lr_linear = v.string("scale_lr") == "linear";
  if (c.type == "sgd") {
    c.sgd.momentum = float(v.number("momentum"));
    c.sgd.dampening = float(v.number("dampening"));
    c.sgd.weight_decay = float(v.number("weight_decay"));
    c.sgd.nesterov = v.boolean("nesterov");
    if (c.sgd.nesterov && (c.sgd.momentum <= 0 || c.sgd.dampening != 0))
      v.fail("nesterov", "needs momentum > 0 and dampening = 0 (as in PyTorch)");
  } else if (c.type == "rmsprop") {
    c.rmsprop.alpha = float(v.number("alpha"));
    c.rmsprop.eps = float(v.number("eps"));
    c.rmsprop.momentum = float(v.number("momentum"));
    c.rmsprop.weight_decay = float(v.number("weight_decay"));
    c.rmsprop.centered = v.boolean("centered");
  } else {
    c.adam.variant = c.type == "nadam"   ? AdamVariant::nadam
                     : c.type == "adamw" ? AdamVariant::adamw
                                         : AdamVariant::adam;
    c.adam.beta1 = float(v.number("beta1"));
    c.adam.beta2 = float(v.number("beta2"));
    c.adam.eps = float(v.number("eps"));
    c.adam.weight_decay = float(v.number("weight_decay"));
  }
  return c;
}

double base_lr(const OptimizerConfig& c, int replicas) { return c.scale_lr_linear ? c.lr * replicas : c.lr; }

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

void Optimizer::step(Backend& b, float* w, const float* g, float* const* state, int64_t n,
                     StepScalars* s) const {
  if (c_.type == "sgd") {
    b.sgd_step(c_.sgd, w, g, state_slots() ? state[0] : nullptr, n, s);
  } else if (c_.type == "rmsprop") {
    b.rmsprop_step(c_.rmsprop, w, g, state[0], state[1], state[2], n, s);
  } else {
    b.adam_step(c_.adam, w, g, state[0], state[1], n, s);
  }
}

}  // namespace trainer
