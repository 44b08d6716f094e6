// The optimizer updates, per element, one formula for the CPU and CUDA kernels (PyTorch's
// torch.optim forms; Nadam as Keras; Lion and LAMB as their papers). Each update has two parts:
//   *_coeffs(): the per-step constants, from the hyper-parameters and the step's scalars
//               (learning rate, bias corrections), computed once per launch;
//   *_update(): one parameter w with its gradient g and state, in place.
// Every operation rounds once (lib/core/host_device.h), so both backends give the same bits.
//
// Each optimizer is a *rule* (the structs at the end): its hyper-parameters and the functions the
// generic step kernels run (kernels/cpu/optimizer_steps.cc, kernels/cuda/optimizer_steps.cu), one
// template per backend for every rule. lib/optim/optimizers.cc declares each rule's config keys
// and checkpoint names. Adding an optimizer: its rule here, its entry there, one line in each
// backend's optimizer_steps file, and its rows in tests/test_optimizers.cc.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>

#include "lib/core/error.h"
#include "lib/core/host_device.h"

namespace trainer {

// The validated hyper-parameters of one optimizer section, by key (booleans as 0 or 1): what a
// rule's constructor reads. lib/optim fills it from the config, every declared key present.
class OptimizerHyper {
 public:
  void set(const std::string& key, double value) { values_[key] = value; }
  bool has(const std::string& key) const { return values_.count(key) > 0; }
  double get(const std::string& key) const {
    auto it = values_.find(key);
    if (it == values_.end()) throw InternalError("an optimizer rule read the undeclared key '" + key + "'");
    return it->second;
  }
  float f(const std::string& key) const { return float(get(key)); }
  const std::map<std::string, double>& values() const { return values_; }

 private:
  std::map<std::string, double> values_;
};

// The most state arrays a rule keeps (RMSprop's three), and the per-step scalars a rule's
// prepare() may write (StepScalars::optim: the Adam family's bias corrections, Nadam's schedule).
constexpr int kMaxOptimizerSlots = 3;
constexpr int kOptimizerScalars = 5;

// A rule's state arrays, each laid out like the parameter arena: at(k, i) is slot k of parameter i.
// Passed by value to the CUDA kernels.
struct OptimizerState {
  float* p[kMaxOptimizerSlots] = {nullptr, nullptr, nullptr};
  TRAINER_HD float& at(int k, int64_t i) const { return p[k][i]; }
  // The first `slots` arrays of `state` (the executor's per-slot arenas; null when there are none).
  static OptimizerState of(float* const* state, int slots) {
    OptimizerState st;
    for (int k = 0; k < slots; ++k) st.p[k] = state[k];
    return st;
  }
};

// ---- SGD: momentum, dampening, Nesterov, L2 weight decay (torch.optim.SGD) ----
//   g' = g + wd*w;  b = g' on the first step, else mu*b + (1-dampening)*g'
//   d = nesterov ? g' + mu*b : b;  w -= lr*d
struct SgdCoeffs {
  float lr, mu, wd, damp;  // damp = 1 - dampening
  bool first, nesterov;    // first: update number 1 (step 0), where b = g'
};

TRAINER_HD SgdCoeffs sgd_coeffs(float momentum, float dampening, float weight_decay, bool nesterov, float lr,
                                uint64_t step) {
  return {lr, momentum, weight_decay, sub_rn(1.f, dampening), step == 0, nesterov};
}

// velocity is read and written only with momentum (c.mu != 0).
TRAINER_HD void sgd_update(const SgdCoeffs& c, float& w, float g, float& velocity) {
  const float wi = w;
  float gi = add_rn(g, mul_rn(c.wd, wi));
  if (c.mu != 0.f) {
    const float b = c.first ? gi : add_rn(mul_rn(c.mu, velocity), mul_rn(c.damp, gi));
    velocity = b;
    gi = c.nesterov ? add_rn(gi, mul_rn(c.mu, b)) : b;
  }
  w = sub_rn(wi, mul_rn(c.lr, gi));
}

// ---- Adam (L2 decay) and AdamW (decoupled decay) ----
//   Adam:  g' = g + wd*w; m = b1 m + (1-b1) g'; v = b2 v + (1-b2) g'^2
//          w -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)            (torch.optim.Adam)
//   AdamW: w *= 1 - lr*wd first, then Adam without the L2 term          (torch.optim.AdamW)
//   bc1 = 1 - b1^t, bc2 = 1 - b2^t.
struct AdamCoeffs {
  float b1, b2, one_b1, one_b2, eps, step_size, sqrt_bc2, decay, l2;
};

TRAINER_HD AdamCoeffs adam_coeffs(float beta1, float beta2, float eps, float weight_decay, bool decoupled,
                                  float lr, float bias_correction1, float bias_correction2) {
  AdamCoeffs c;
  c.b1 = beta1;
  c.b2 = beta2;
  c.one_b1 = sub_rn(1.f, beta1);
  c.one_b2 = sub_rn(1.f, beta2);
  c.eps = eps;
  c.step_size = div_rn(lr, bias_correction1);
  c.sqrt_bc2 = sqrt_rn(bias_correction2);
  c.decay = decoupled ? sub_rn(1.f, mul_rn(lr, weight_decay)) : 1.f;
  c.l2 = decoupled ? 0.f : weight_decay;
  return c;
}

TRAINER_HD void adam_update(const AdamCoeffs& c, float& w, float g, float& m, float& v) {
  const float wi = mul_rn(w, c.decay);
  const float gi = add_rn(g, mul_rn(c.l2, wi));
  const float mi = add_rn(mul_rn(c.b1, m), mul_rn(c.one_b1, gi));
  const float vi = add_rn(mul_rn(c.b2, v), mul_rn(mul_rn(c.one_b2, gi), gi));
  m = mi;
  v = vi;
  const float denom = add_rn(div_rn(sqrt_rn(vi), c.sqrt_bc2), c.eps);
  w = sub_rn(wi, div_rn(mul_rn(c.step_size, mi), denom));
}

// ---- Nadam, Keras' formula with momentum decay mu_t = b1 (1 - 0.5 * 0.96^(t*0.004)) ----
//   m_hat = mu_{t+1} m / (1 - prod_{i<=t+1} mu_i) + (1-mu_t) g' / (1 - prod_{i<=t} mu_i)
//   w -= lr * m_hat / (sqrt(v / bc2) + eps)
//   momentum_product = prod mu_i up to t; mu_t, mu_next: mu at t and t+1 (t counted from 1).
struct NadamCoeffs {
  float lr, b1, b2, one_b1, one_b2, eps, wd, c_m, c_g, bc2;
};

TRAINER_HD NadamCoeffs nadam_coeffs(float beta1, float beta2, float eps, float weight_decay, float lr,
                                    float bias_correction2, float momentum_product, float mu_t,
                                    float mu_next) {
  NadamCoeffs c;
  c.lr = lr;
  c.b1 = beta1;
  c.b2 = beta2;
  c.one_b1 = sub_rn(1.f, beta1);
  c.one_b2 = sub_rn(1.f, beta2);
  c.eps = eps;
  c.wd = weight_decay;
  const float prod_next = mul_rn(momentum_product, mu_next);
  c.c_m = div_rn(mu_next, sub_rn(1.f, prod_next));
  c.c_g = div_rn(sub_rn(1.f, mu_t), sub_rn(1.f, momentum_product));
  c.bc2 = bias_correction2;
  return c;
}

TRAINER_HD void nadam_update(const NadamCoeffs& c, float& w, float g, float& m, float& v) {
  const float wi = w;
  const float gi = add_rn(g, mul_rn(c.wd, wi));
  const float mi = add_rn(mul_rn(c.b1, m), mul_rn(c.one_b1, gi));
  const float vi = add_rn(mul_rn(c.b2, v), mul_rn(mul_rn(c.one_b2, gi), gi));
  m = mi;
  v = vi;
  const float m_hat = add_rn(mul_rn(c.c_m, mi), mul_rn(c.c_g, gi));
  const float denom = add_rn(sqrt_rn(div_rn(vi, c.bc2)), c.eps);
  w = sub_rn(wi, div_rn(mul_rn(c.lr, m_hat), denom));
}

// ---- RMSprop (torch.optim.RMSprop) ----
//   g' = g + wd*w; sq = a sq + (1-a) g'^2; var = sq - ga^2 when centered (ga = a ga + (1-a) g')
//   denom = sqrt(var) + eps; momentum: buf = mu buf + g'/denom, w -= lr buf; else w -= lr g'/denom
struct RmspropCoeffs {
  float lr, a, one_a, eps, momentum, wd;
  bool centered;
};

TRAINER_HD RmspropCoeffs rmsprop_coeffs(float alpha, float eps, float momentum, float weight_decay,
                                        bool centered, float lr) {
  return {lr, alpha, sub_rn(1.f, alpha), eps, momentum, weight_decay, centered};
}

// avg is touched only when centered, buf only with momentum.
TRAINER_HD void rmsprop_update(const RmspropCoeffs& c, float& w, float g, float& sq, float& buf, float& avg) {
  const float wi = w;
  const float gi = add_rn(g, mul_rn(c.wd, wi));
  const float sqi = add_rn(mul_rn(c.a, sq), mul_rn(mul_rn(c.one_a, gi), gi));
  sq = sqi;
  float var = sqi;
  if (c.centered) {
    const float ai = add_rn(mul_rn(c.a, avg), mul_rn(c.one_a, gi));
    avg = ai;
    var = sub_rn(var, mul_rn(ai, ai));
  }
  const float denom = add_rn(sqrt_rn(var), c.eps);
  if (c.momentum > 0.f) {
    const float b = add_rn(mul_rn(c.momentum, buf), div_rn(gi, denom));
    buf = b;
    w = sub_rn(wi, mul_rn(c.lr, b));
  } else {
    w = sub_rn(wi, div_rn(mul_rn(c.lr, gi), denom));
  }
}

// ---- Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms", Algorithm 2) ----
//   c = b1 m + (1-b1) g;  w = w (1 - lr wd) - lr sign(c);  m = b2 m + (1-b2) g      (sign(0) = 0)
struct LionCoeffs {
  float lr, b1, one_b1, b2, one_b2, decay;
};

TRAINER_HD LionCoeffs lion_coeffs(float beta1, float beta2, float weight_decay, float lr) {
  return {lr, beta1, sub_rn(1.f, beta1), beta2, sub_rn(1.f, beta2), sub_rn(1.f, mul_rn(lr, weight_decay))};
}

TRAINER_HD void lion_update(const LionCoeffs& c, float& w, float g, float& m) {
  const float wi = mul_rn(w, c.decay);
  const float ci = add_rn(mul_rn(c.b1, m), mul_rn(c.one_b1, g));
  const float sign = ci > 0.f ? 1.f : (ci < 0.f ? -1.f : 0.f);
  w = sub_rn(wi, mul_rn(c.lr, sign));
  m = add_rn(mul_rn(c.b2, m), mul_rn(c.one_b2, g));
}

// ---- LAMB (You et al. 2020, "Large Batch Optimization for Deep Learning", Algorithm 2, with
// Adam's bias correction as NVIDIA's apex FusedLAMB) ----
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   u = (m / bc1) / (sqrt(v / bc2) + eps) + wd w                    per element
//   r = ||w|| / ||u|| over each parameter tensor (1 when either norm is 0)
//   w -= lr r u
// Two passes: lamb_moments() updates the moments and returns u; lamb_direction() gives u again
// from the updated moments for the second pass, after the tensor's norms are known.
struct LambCoeffs {
  float lr, b1, b2, one_b1, one_b2, eps, wd, bc1, bc2;
};

TRAINER_HD LambCoeffs lamb_coeffs(float beta1, float beta2, float eps, float weight_decay, float lr,
                                  float bias_correction1, float bias_correction2) {
  return {lr,
          beta1,
          beta2,
          sub_rn(1.f, beta1),
          sub_rn(1.f, beta2),
          eps,
          weight_decay,
          bias_correction1,
          bias_correction2};
}

TRAINER_HD float lamb_direction(const LambCoeffs& c, float w, float m, float v) {
  const float denom = add_rn(sqrt_rn(div_rn(v, c.bc2)), c.eps);
  return add_rn(div_rn(div_rn(m, c.bc1), denom), mul_rn(c.wd, w));
}

TRAINER_HD float lamb_moments(const LambCoeffs& c, float w, float g, float& m, float& v) {
  m = add_rn(mul_rn(c.b1, m), mul_rn(c.one_b1, g));
  v = add_rn(mul_rn(c.b2, v), mul_rn(mul_rn(c.one_b2, g), g));
  return lamb_direction(c, w, m, v);
}

// The trust ratio from the tensor's sums of squares of w and of u.
TRAINER_HD float lamb_trust_ratio(double w_sq, double u_sq) {
  return w_sq > 0.0 && u_sq > 0.0 ? float(sqrt(w_sq) / sqrt(u_sq)) : 1.f;
}

// ==== The rules ====
// A rule is constructed on the host from OptimizerHyper and passed by value to the kernels:
//   kName            the config's optimizer.type
//   kSlots           the most state arrays it keeps (checkpoint names: lib/optim/optimizers.cc)
//   kTensorwise      false: update() per element; true: moments() and apply() with per-tensor norms
//   slots()          how many state arrays it keeps with these hyper-parameters
//   prepare(t, sc)   on the host, the per-step scalars of update t (1-based) into
//                    sc[kOptimizerScalars] (StepScalars::optim), which keeps them between calls
//   coeffs(lr, step, sc)  the constants of one launch (step: t - 1), on the device
//   update(c, w, g, st, i)  element-wise: parameter i in place
//   moments(c, w, g, st, i, &u) / apply(c, w, st, i, lr_ratio)  tensor-wise (LAMB)

struct SgdRule {
  static constexpr const char* kName = "sgd";
  static constexpr int kSlots = 1;
  static constexpr bool kTensorwise = false;
  using Coeffs = SgdCoeffs;
  float momentum, dampening, weight_decay;
  bool nesterov;
  explicit SgdRule(const OptimizerHyper& h)
      : momentum(h.f("momentum")),
        dampening(h.f("dampening")),
        weight_decay(h.f("weight_decay")),
        nesterov(h.get("nesterov") != 0) {}
  int slots() const { return momentum > 0.f ? 1 : 0; }
  void prepare(int64_t, float*) const {}
  TRAINER_HD Coeffs coeffs(float lr, uint64_t step, const float*) const {
    return sgd_coeffs(momentum, dampening, weight_decay, nesterov, lr, step);
  }
  // No momentum: no state array (it may be null), so the velocity is a local that sgd_update leaves.
  TRAINER_HD static void update(const Coeffs& c, float& w, float g, const OptimizerState& st, int64_t i) {
    float unused = 0.f;
    sgd_update(c, w, g, c.mu != 0.f ? st.at(0, i) : unused);
  }
};

// The Adam family's bias corrections 1 - b^t, in double, into sc[0] and sc[1].
inline void adam_bias_corrections(double beta1, double beta2, int64_t t, float* sc) {
  sc[0] = float(1.0 - std::pow(beta1, double(t)));
  sc[1] = float(1.0 - std::pow(beta2, double(t)));
}

struct AdamRule {
  static constexpr const char* kName = "adam";
  static constexpr int kSlots = 2;
  static constexpr bool kTensorwise = false;
  using Coeffs = AdamCoeffs;
  float beta1, beta2, eps, weight_decay;
  bool decoupled;
  explicit AdamRule(const OptimizerHyper& h, bool decoupled_decay = false)
      : beta1(h.f("beta1")),
        beta2(h.f("beta2")),
        eps(h.f("eps")),
        weight_decay(h.f("weight_decay")),
        decoupled(decoupled_decay) {}
  int slots() const { return 2; }
  void prepare(int64_t t, float* sc) const { adam_bias_corrections(beta1, beta2, t, sc); }
  TRAINER_HD Coeffs coeffs(float lr, uint64_t, const float* sc) const {
    return adam_coeffs(beta1, beta2, eps, weight_decay, decoupled, lr, sc[0], sc[1]);
  }
  TRAINER_HD static void update(const Coeffs& c, float& w, float g, const OptimizerState& st, int64_t i) {
    adam_update(c, w, g, st.at(0, i), st.at(1, i));
  }
};

struct AdamWRule : AdamRule {
  static constexpr const char* kName = "adamw";
  explicit AdamWRule(const OptimizerHyper& h) : AdamRule(h, true) {}
};

// Keras' momentum schedule: sc[2] the running product of mu up to t (carried between calls and in
// checkpoints), sc[3] mu_t, sc[4] mu_{t+1}.
struct NadamRule {
  static constexpr const char* kName = "nadam";
  static constexpr int kSlots = 2;
  static constexpr bool kTensorwise = false;
  using Coeffs = NadamCoeffs;
  float beta1, beta2, eps, weight_decay;
  explicit NadamRule(const OptimizerHyper& h)
      : beta1(h.f("beta1")), beta2(h.f("beta2")), eps(h.f("eps")), weight_decay(h.f("weight_decay")) {}
  int slots() const { return 2; }
  void prepare(int64_t t, float* sc) const {
    adam_bias_corrections(beta1, beta2, t, sc);
    const double b1 = beta1;
    auto mu = [&](int64_t k) { return float(b1 * (1.0 - 0.5 * std::pow(0.96, double(k) * 0.004))); };
    if (t == 1) sc[2] = 1.f;
    sc[3] = mu(t);
    sc[4] = mu(t + 1);
    sc[2] *= sc[3];
  }
  TRAINER_HD Coeffs coeffs(float lr, uint64_t, const float* sc) const {
    return nadam_coeffs(beta1, beta2, eps, weight_decay, lr, sc[1], sc[2], sc[3], sc[4]);
  }
  TRAINER_HD static void update(const Coeffs& c, float& w, float g, const OptimizerState& st, int64_t i) {
    nadam_update(c, w, g, st.at(0, i), st.at(1, i));
  }
};

// Three arrays always (square average, momentum buffer, centered average), as PyTorch's state.
struct RmspropRule {
  static constexpr const char* kName = "rmsprop";
  static constexpr int kSlots = 3;
  static constexpr bool kTensorwise = false;
  using Coeffs = RmspropCoeffs;
  float alpha, eps, momentum, weight_decay;
  bool centered;
  explicit RmspropRule(const OptimizerHyper& h)
      : alpha(h.f("alpha")),
        eps(h.f("eps")),
        momentum(h.f("momentum")),
        weight_decay(h.f("weight_decay")),
        centered(h.get("centered") != 0) {}
  int slots() const { return 3; }
  void prepare(int64_t, float*) const {}
  TRAINER_HD Coeffs coeffs(float lr, uint64_t, const float*) const {
    return rmsprop_coeffs(alpha, eps, momentum, weight_decay, centered, lr);
  }
  TRAINER_HD static void update(const Coeffs& c, float& w, float g, const OptimizerState& st, int64_t i) {
    rmsprop_update(c, w, g, st.at(0, i), st.at(1, i), st.at(2, i));
  }
};

struct LionRule {
  static constexpr const char* kName = "lion";
  static constexpr int kSlots = 1;
  static constexpr bool kTensorwise = false;
  using Coeffs = LionCoeffs;
  float beta1, beta2, weight_decay;
  explicit LionRule(const OptimizerHyper& h)
      : beta1(h.f("beta1")), beta2(h.f("beta2")), weight_decay(h.f("weight_decay")) {}
  int slots() const { return 1; }
  void prepare(int64_t, float*) const {}
  TRAINER_HD Coeffs coeffs(float lr, uint64_t, const float*) const {
    return lion_coeffs(beta1, beta2, weight_decay, lr);
  }
  TRAINER_HD static void update(const Coeffs& c, float& w, float g, const OptimizerState& st, int64_t i) {
    lion_update(c, w, g, st.at(0, i));
  }
};

struct LambRule {
  static constexpr const char* kName = "lamb";
  static constexpr int kSlots = 2;
  static constexpr bool kTensorwise = true;
  using Coeffs = LambCoeffs;
  float beta1, beta2, eps, weight_decay;
  explicit LambRule(const OptimizerHyper& h)
      : beta1(h.f("beta1")), beta2(h.f("beta2")), eps(h.f("eps")), weight_decay(h.f("weight_decay")) {}
  int slots() const { return 2; }
  void prepare(int64_t t, float* sc) const { adam_bias_corrections(beta1, beta2, t, sc); }
  TRAINER_HD Coeffs coeffs(float lr, uint64_t, const float* sc) const {
    return lamb_coeffs(beta1, beta2, eps, weight_decay, lr, sc[0], sc[1]);
  }
  // The first pass: the moments of parameter i, and its direction u.
  TRAINER_HD static float moments(const Coeffs& c, float w, float g, const OptimizerState& st, int64_t i) {
    return lamb_moments(c, w, g, st.at(0, i), st.at(1, i));
  }
  // The second pass: w -= lr * r * u, with ratio = r from lamb_trust_ratio over the tensor.
  TRAINER_HD static void apply(const Coeffs& c, float& w, const OptimizerState& st, int64_t i, float ratio) {
    const float u = lamb_direction(c, w, st.at(0, i), st.at(1, i));
    w = sub_rn(w, mul_rn(mul_rn(c.lr, ratio), u));
  }
  TRAINER_HD static float ratio(double w_sq, double u_sq) { return lamb_trust_ratio(w_sq, u_sq); }
};

// A rule type passed as a value (for_each_optimizer_rule's callback takes it as `auto`).
template <class Rule>
struct RuleTag {
  using type = Rule;
};

// f(RuleTag<R>()) for every rule above. Each backend registers its step for each
// (kernels/cpu/optimizer_steps.cc, kernels/cuda/optimizer_steps.cu), so a new rule is listed here
// once, beside its keys and checkpoint names (lib/optim/optimizers.cc).
template <class F>
void for_each_optimizer_rule(F&& f) {
  f(RuleTag<SgdRule>());
  f(RuleTag<AdamRule>());
  f(RuleTag<AdamWRule>());
  f(RuleTag<NadamRule>());
  f(RuleTag<RmspropRule>());
  f(RuleTag<LionRule>());
  f(RuleTag<LambRule>());
}

}  // namespace trainer
