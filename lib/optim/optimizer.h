// Optimizer: hyper-parameters, how many parameter-sized state arrays it keeps, the per-step
// scalars (learning rate, bias corrections) and which backend update runs. The update itself is
// one kernel over the whole flat parameter arena.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "lib/backend/backend.h"

namespace trainer {

class NodeReader;
struct KeyVariant;
using KeyVariants = std::vector<KeyVariant>;

struct OptimizerConfig {
  std::string type = "adam";  // sgd | adam | adamw | nadam | rmsprop
  double lr = 1e-3;
  // scale_lr: linear: lr (the schedule's base) times the data-parallel replicas or ranks.
  bool scale_lr_linear = false;
  SgdHyper sgd;
  AdamHyper adam;
  RmspropHyper rmsprop;
};

// Every optimizer `type` with the keys it declares (lib/config/key_spec.h); the type when none is given.
const KeyVariants& optimizer_keys();
inline constexpr const char* kDefaultOptimizer = "adam";
// Validates the `optimizer:` section with those declarations (an unknown key is an error) and
// reads it; the resolved values are left in r.resolved().
OptimizerConfig read_optimizer(NodeReader& r);
// The base learning rate of a run over `replicas` data-parallel replicas (or mpirun ranks; 1: one
// process): optimizer.lr, times `replicas` under scale_lr: linear (Goyal et al.'s linear scaling
// rule: the global batch grows with the replicas, the rate with it).
double base_lr(const OptimizerConfig& c, int replicas);

class Optimizer {
 public:
  explicit Optimizer(const OptimizerConfig& c) : c_(c) {}
  const OptimizerConfig& config() const { return c_; }
  // Parameter-sized state arenas (momentum, moments...): each laid out like the parameter arena,
  // with the same per-tensor offsets (lib/model/arena_layout.h).
  int state_slots() const;
  // Fills lr, bias corrections and Nadam's momentum schedule for update number t (1-based).
  // momentum_product carries Nadam's running product between calls.
  void prepare(StepScalars& s, int64_t t, float lr) const;
  // One update of the n floats of the parameter arena w (g: the gradient arena);
  // state[k]: state slot k's arena, k < state_slots() (state may be null when there are none).
  void step(Backend& b, float* w, const float* g, float* const* state, int64_t n, StepScalars* s) const;

 private:
  OptimizerConfig c_;
};

}  // namespace trainer
