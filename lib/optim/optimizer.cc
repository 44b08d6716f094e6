#include "lib/optim/optimizer.h"

#include <algorithm>

#include "lib/backend/backend.h"
#include "lib/core/error.h"

namespace trainer {

OptimizerRegistry& OptimizerRegistry::global() {
  static OptimizerRegistry* r = [] {
    auto* reg = new OptimizerRegistry;
    register_builtin_optimizers(*reg);
    return reg;
  }();
  return *r;
}

void OptimizerRegistry::add_entry(OptimizerEntry e, int max_slots) {
  for (const OptimizerEntry& o : entries_)
    if (o.name == e.name) throw InternalError("optimizer '" + e.name + "' registered twice");
  if (int(e.state_names.size()) != max_slots || max_slots > kMaxOptimizerSlots)
    throw InternalError("optimizer '" + e.name + "' names " + std::to_string(e.state_names.size()) +
                        " state slots but its rule keeps up to " + std::to_string(max_slots));
  for (const char* k : {"lr", "scale_lr"}) key_named(e.keys, k);  // every optimizer has them
  variants_.push_back({e.name, e.keys, e.doc});
  entries_.push_back(std::move(e));
}

void OptimizerRegistry::add_kernel(const std::string& name, const std::string& backend,
                                   OptimizerKernelFactory make) {
  for (OptimizerEntry& e : entries_)
    if (e.name == name) {
      e.kernels[backend] = std::move(make);
      return;
    }
  throw InternalError("a " + backend + " step was registered for the unknown optimizer '" + name + "'");
}

const OptimizerEntry& OptimizerRegistry::entry(const std::string& name) const {
  for (const OptimizerEntry& e : entries_)
    if (e.name == name) return e;
  throw InternalError("unknown optimizer '" + name + "' (configs are validated before)");
}

const KeyVariants& optimizer_keys() { return OptimizerRegistry::global().variants(); }

OptimizerConfig read_optimizer(NodeReader& r) {
  const OptimizerRegistry& reg = OptimizerRegistry::global();
  const KeyValues v = read_variant(r, "type", kDefaultOptimizer, reg.variants());
  OptimizerConfig c;
  c.type = v.string("type");
  c.lr = v.number("lr");
  c.scale_lr_linear = v.string("scale_lr") == "linear";
  const OptimizerEntry& e = reg.entry(c.type);
  for (const KeySpec& k : e.keys) {
    if (k.name == "lr" || k.name == "scale_lr") continue;
    if (k.type == KeySpec::Type::boolean)
      c.hyper.set(k.name, v.boolean(k.name) ? 1.0 : 0.0);
    else if (k.type == KeySpec::Type::number)
      c.hyper.set(k.name, v.number(k.name));
    else
      throw InternalError("optimizer '" + c.type + "' declares '" + k.name +
                          "', neither a number nor a boolean");
  }
  if (e.check) e.check(v);
  return c;
}

double base_lr(const OptimizerConfig& c, int replicas) { return c.scale_lr_linear ? c.lr * replicas : c.lr; }

Optimizer::Optimizer(const OptimizerConfig& c) : c_(c), entry_(&OptimizerRegistry::global().entry(c.type)) {
  for (const KeySpec& k : entry_->keys) {
    if (k.name == "lr" || k.name == "scale_lr" || c_.hyper.has(k.name)) continue;
    c_.hyper.set(k.name,
                 k.type == KeySpec::Type::boolean ? (k.def.as<bool>() ? 1.0 : 0.0) : k.def.as<double>());
  }
  slots_ = entry_->slots(c_.hyper);
}

std::vector<std::string> Optimizer::state_names() const {
  return {entry_->state_names.begin(), entry_->state_names.begin() + slots_};
}

void Optimizer::prepare(StepScalars& s, int64_t t, float lr) const {
  s.lr = lr;
  s.step = uint64_t(t - 1);
  entry_->prepare(c_.hyper, t, s.optim);
}

std::unique_ptr<OptimizerKernel> Optimizer::make_kernel(Backend& b, int64_t n,
                                                        std::vector<ParamRange> tensors) const {
  auto it = entry_->kernels.find(b.name());
  if (it == entry_->kernels.end())
    throw UsageError("the " + b.name() + " backend has no step for optimizer '" + c_.type + "'");
  OptimizerSpec spec;
  spec.backend = &b;
  spec.hyper = c_.hyper;
  spec.n = n;
  spec.tensors = std::move(tensors);
  return it->second(spec);
}

}  // namespace trainer
