// The optimizer conformance table: one or more rows per registered optimizer, each a config and a
// float64 reference of the published update (torch.optim's SGD, Adam, AdamW, RMSprop; Keras'
// Nadam; Lion: Chen et al. 2023, Algorithm 2, as lucidrains' lion-pytorch; LAMB: You et al. 2020,
// Algorithm 2, with Adam's bias correction as NVIDIA apex's FusedLAMB). tests/test_optimizers.cc
// runs every row on the CPU against its reference; tests/gpu/test_gpu_ops.cc runs it on the GPU
// against the CPU. Adding an optimizer adds a row (test_optimizers.cc fails until it has one).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "lib/keys/node_reader.h"
#include "lib/optim/optimizer.h"

namespace trainer::optim_tests {

inline OptimizerConfig optimizer_from(const std::string& yaml) {
  YAML::Node node = YAML::Load(yaml);
  NodeReader r(node, "optimizer", "optimizer_rows");
  OptimizerConfig c = read_optimizer(r);
  r.finish();
  return c;
}

// One update in double: w, g over the arena; state[k] slot k (kMaxOptimizerSlots of them, each
// the arena's size); t: the update number (1-based).
struct RefStep {
  const OptimizerHyper& h;
  double lr;
  int64_t t;
  std::vector<double>& w;
  const std::vector<double>& g;
  std::vector<std::vector<double>>& st;
  const std::vector<ParamRange>& tensors;
};
using Reference = std::function<void(RefStep&)>;

struct OptimizerRow {
  std::string yaml;  // the optimizer section
  Reference ref;
};

// Every element of every tensor (padding never).
inline void each(const RefStep& s, const std::function<void(size_t)>& f) {
  for (const ParamRange& r : s.tensors)
    for (int64_t i = r.offset; i < r.offset + r.size; ++i) f(size_t(i));
}

inline void sgd_ref(RefStep& s) {
  const double mu = s.h.get("momentum"), damp = s.h.get("dampening"), wd = s.h.get("weight_decay");
  const bool nesterov = s.h.get("nesterov") != 0;
  each(s, [&](size_t i) {
    double g = s.g[i] + wd * s.w[i];
    if (mu != 0) {
      double& b = s.st[0][i];
      b = s.t == 1 ? g : mu * b + (1 - damp) * g;
      g = nesterov ? g + mu * b : b;
    }
    s.w[i] -= s.lr * g;
  });
}

inline void adam_ref(RefStep& s, bool decoupled) {
  const double b1 = s.h.get("beta1"), b2 = s.h.get("beta2"), eps = s.h.get("eps"),
               wd = s.h.get("weight_decay");
  const double bc1 = 1 - std::pow(b1, double(s.t)), bc2 = 1 - std::pow(b2, double(s.t));
  each(s, [&](size_t i) {
    double& w = s.w[i];
    double g = s.g[i];
    if (decoupled)
      w *= 1 - s.lr * wd;
    else
      g += wd * w;
    double &m = s.st[0][i], &v = s.st[1][i];
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    w -= s.lr / bc1 * m / (std::sqrt(v) / std::sqrt(bc2) + eps);
  });
}

// Keras' Nadam: mu_t = b1 (1 - 0.5 * 0.96^(0.004 t)); the running product is recomputed from t.
inline void nadam_ref(RefStep& s) {
  const double b1 = s.h.get("beta1"), b2 = s.h.get("beta2"), eps = s.h.get("eps"),
               wd = s.h.get("weight_decay");
  const auto mu = [&](double t) { return b1 * (1 - 0.5 * std::pow(0.96, t * 0.004)); };
  double prod = 1;
  for (int64_t k = 1; k <= s.t; ++k) prod *= mu(double(k));
  const double u_t = mu(double(s.t)), u_next = mu(double(s.t + 1)), prod_next = prod * u_next;
  each(s, [&](size_t i) {
    const double g = s.g[i] + wd * s.w[i];
    double &m = s.st[0][i], &v = s.st[1][i];
    m = b1 * m + (1 - b1) * g;
    v = b2 * v + (1 - b2) * g * g;
    const double m_hat = u_next * m / (1 - prod_next) + (1 - u_t) * g / (1 - prod);
    s.w[i] -= s.lr * m_hat / (std::sqrt(v / (1 - std::pow(b2, double(s.t)))) + eps);
  });
}

inline void rmsprop_ref(RefStep& s) {
  const double a = s.h.get("alpha"), eps = s.h.get("eps"), mu = s.h.get("momentum"),
               wd = s.h.get("weight_decay");
  const bool centered = s.h.get("centered") != 0;
  each(s, [&](size_t i) {
    const double g = s.g[i] + wd * s.w[i];
    double &sq = s.st[0][i], &buf = s.st[1][i], &avg = s.st[2][i];
    sq = a * sq + (1 - a) * g * g;
    double var = sq;
    if (centered) {
      avg = a * avg + (1 - a) * g;
      var -= avg * avg;
    }
    const double denom = std::sqrt(var) + eps;
    if (mu > 0) {
      buf = mu * buf + g / denom;
      s.w[i] -= s.lr * buf;
    } else {
      s.w[i] -= s.lr * g / denom;
    }
  });
}

inline void lion_ref(RefStep& s) {
  const double b1 = s.h.get("beta1"), b2 = s.h.get("beta2"), wd = s.h.get("weight_decay");
  each(s, [&](size_t i) {
    double &w = s.w[i], &m = s.st[0][i];
    const double c = b1 * m + (1 - b1) * s.g[i];
    w = w * (1 - s.lr * wd) - s.lr * double((c > 0) - (c < 0));
    m = b2 * m + (1 - b2) * s.g[i];
  });
}

inline void lamb_ref(RefStep& s) {
  const double b1 = s.h.get("beta1"), b2 = s.h.get("beta2"), eps = s.h.get("eps"),
               wd = s.h.get("weight_decay");
  const double bc1 = 1 - std::pow(b1, double(s.t)), bc2 = 1 - std::pow(b2, double(s.t));
  for (const ParamRange& r : s.tensors) {
    std::vector<double> u(size_t(r.size));
    double w_sq = 0, u_sq = 0;
    for (int64_t k = 0; k < r.size; ++k) {
      const size_t i = size_t(r.offset + k);
      double &m = s.st[0][i], &v = s.st[1][i];
      m = b1 * m + (1 - b1) * s.g[i];
      v = b2 * v + (1 - b2) * s.g[i] * s.g[i];
      u[size_t(k)] = (m / bc1) / (std::sqrt(v / bc2) + eps) + wd * s.w[i];
      w_sq += s.w[i] * s.w[i];
      u_sq += u[size_t(k)] * u[size_t(k)];
    }
    const double ratio = w_sq > 0 && u_sq > 0 ? std::sqrt(w_sq) / std::sqrt(u_sq) : 1.0;
    for (int64_t k = 0; k < r.size; ++k) s.w[size_t(r.offset + k)] -= s.lr * ratio * u[size_t(k)];
  }
}

inline const std::vector<OptimizerRow>& optimizer_rows() {
  static const std::vector<OptimizerRow> rows = {
      {"{type: sgd, lr: 0.1}", sgd_ref},
      {"{type: sgd, lr: 0.1, momentum: 0.9, dampening: 0.1}", sgd_ref},
      {"{type: sgd, lr: 0.05, momentum: 0.9, nesterov: true, weight_decay: 0.001}", sgd_ref},
      {"{type: adam, lr: 0.01, weight_decay: 0.01}", [](RefStep& s) { adam_ref(s, false); }},
      {"{type: adamw, lr: 0.01}", [](RefStep& s) { adam_ref(s, true); }},
      {"{type: nadam, lr: 0.002}", nadam_ref},
      {"{type: rmsprop, lr: 0.01}", rmsprop_ref},
      {"{type: rmsprop, lr: 0.01, centered: true, momentum: 0.8, weight_decay: 0.001}", rmsprop_ref},
      {"{type: lion, lr: 0.001}", lion_ref},
      {"{type: lion, lr: 0.0003, beta1: 0.95, beta2: 0.98, weight_decay: 0.1}", lion_ref},
      {"{type: lamb, lr: 0.01}", lamb_ref},
      {"{type: lamb, lr: 0.005, weight_decay: 0, eps: 1e-8}", lamb_ref},
  };
  return rows;
}

}  // namespace trainer::optim_tests
