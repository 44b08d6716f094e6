// Optimizers: the registry of every optimizer type (its config keys, state slots and their
// checkpoint names, the rule that computes it: lib/core/optimizer_formulas.h) with each backend's
// step (kernels/*/optimizer_steps.*), and the Optimizer a run uses. The update itself is one
// OptimizerKernel over the whole flat parameter arena (lib/backend/optimizer_kernel.h).
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/backend/optimizer_kernel.h"
#include "lib/keys/key_spec.h"

namespace trainer {

class NodeReader;

struct OptimizerConfig {
  std::string type = "adam";  // a registered optimizer's name
  double lr = 1e-3;
  // scale_lr: linear: lr (the schedule's base) times the data-parallel replicas or ranks.
  bool scale_lr_linear = false;
  // The type's other keys, as given; a key left out takes its declared default (Optimizer fills
  // them in, so OptimizerConfig{} is Adam with PyTorch's defaults).
  OptimizerHyper hyper;
};

struct OptimizerEntry {
  std::string name;
  std::string doc;  // one line: what it is (trainer help, docs/config.md)
  KeySpecs keys;    // every key but `type`: lr and scale_lr first
  // The checkpoint names of the state slots (PyTorch's state keys: exp_avg...), kSlots of them.
  std::vector<std::string> state_names;
  // A constraint between keys (SGD's nesterov needs momentum); null: none. Fails through
  // KeyValues::fail, at the key's position.
  std::function<void(const KeyValues&)> check;
  // From the rule (OptimizerRegistry::add): the state slots kept with these values, and the
  // host's per-step scalars of update t into StepScalars::optim.
  std::function<int(const OptimizerHyper&)> slots;
  std::function<void(const OptimizerHyper&, int64_t, float*)> prepare;
  std::map<std::string, OptimizerKernelFactory> kernels;  // backend name -> its step
};

class OptimizerRegistry {
 public:
  // Every built-in optimizer (lib/optim/optimizers.cc); the backends' steps join through
  // register_backends().
  static OptimizerRegistry& global();

  // Registers rule R (lib/core/optimizer_formulas.h) under R::kName with e's keys and docs.
  template <class R>
  void add(OptimizerEntry e) {
    e.name = R::kName;
    e.slots = [](const OptimizerHyper& h) { return R(h).slots(); };
    e.prepare = [](const OptimizerHyper& h, int64_t t, float* sc) { R(h).prepare(t, sc); };
    add_entry(std::move(e), R::kSlots);
  }
  // Backend `backend`'s step for the optimizer `name` (registered before).
  void add_kernel(const std::string& name, const std::string& backend, OptimizerKernelFactory make);

  // InternalError for a name that is not registered (configs are validated first).
  const OptimizerEntry& entry(const std::string& name) const;
  const std::vector<OptimizerEntry>& entries() const { return entries_; }
  // The optimizer section's keys per type, for read_variant and the schema.
  const KeyVariants& variants() const { return variants_; }

 private:
  void add_entry(OptimizerEntry e, int max_slots);
  std::vector<OptimizerEntry> entries_;
  KeyVariants variants_;
};

// Defined in lib/optim/optimizers.cc: sgd, adam, adamw, nadam, rmsprop, lion, lamb.
void register_builtin_optimizers(OptimizerRegistry& r);

// Every optimizer `type` with the keys it declares (lib/keys/key_spec.h); the type when none is given.
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
  // Looks the type up (InternalError when unknown) and fills in the defaults of keys not given.
  explicit Optimizer(const OptimizerConfig& c);
  const OptimizerConfig& config() const { return c_; }
  // Parameter-sized state arenas (momentum, moments...): each laid out like the parameter arena,
  // with the same per-tensor offsets (lib/model/arena_layout.h).
  int state_slots() const { return slots_; }
  // Their names in checkpoints ("<param>.<name>"), state_slots() of them.
  std::vector<std::string> state_names() const;
  // Fills lr, step and the optimizer's scalars (StepScalars::optim) for update number t (1-based).
  // The scalars carry Nadam's running product between calls.
  void prepare(StepScalars& s, int64_t t, float lr) const;
  // The update over an arena of n floats holding `tensors` on backend b (its memory: bind it
  // with scratch_bytes() of backend memory before the first step). UsageError when b has no step
  // for this optimizer.
  std::unique_ptr<OptimizerKernel> make_kernel(Backend& b, int64_t n,
                                               std::vector<ParamRange> tensors = {}) const;

 private:
  OptimizerConfig c_;
  const OptimizerEntry* entry_ = nullptr;
  int slots_ = 0;
};

}  // namespace trainer
