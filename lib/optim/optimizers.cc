// Every built-in optimizer: its config keys (defaults as PyTorch's; Nadam's eps as Keras'; Lion's
// and LAMB's as their papers and NVIDIA's apex), its state's checkpoint names (PyTorch's state
// keys) and its rule (lib/core/optimizer_formulas.h). Each backend registers a step per rule in
// kernels/*/optimizer_steps.*.
#include "lib/optim/optimizer.h"

namespace trainer {
namespace {

OptimizerEntry entry(std::string doc, KeySpecs keys, std::vector<std::string> state_names) {
  OptimizerEntry e;
  e.doc = std::move(doc);
  e.keys = std::move(keys);
  e.state_names = std::move(state_names);
  return e;
}

}  // namespace

void register_builtin_optimizers(OptimizerRegistry& r) {
  const double big = 1e6;
  const KeySpec scale_lr =
      choice_key("scale_lr", "none", {"none", "linear"},
                 "linear: lr times the data-parallel replicas or ranks (none: as given)");
  const auto lr = [&](double def) { return number_key("lr", def, 0, big, "learning rate"); };
  const auto adam_like = [&](double lr_def, double eps, double weight_decay, const std::string& decay_doc) {
    return KeySpecs{lr(lr_def),
                    scale_lr,
                    number_key("beta1", 0.9, 0, 0.999999, "decay of the first moment"),
                    number_key("beta2", 0.999, 0, 0.999999999, "decay of the second moment"),
                    number_key("eps", eps, 0, 1, "added to the denominator"),
                    number_key("weight_decay", weight_decay, 0, big, decay_doc)};
  };
  const std::vector<std::string> moments = {"exp_avg", "exp_avg_sq"};

  OptimizerEntry sgd =
      entry("stochastic gradient descent with momentum (torch.optim.SGD)",
            {lr(0.01), scale_lr, number_key("momentum", 0, 0, 1, "momentum factor"),
             number_key("dampening", 0, 0, 1, "dampening of the momentum"),
             number_key("weight_decay", 0, 0, big, "L2 penalty added to the gradient"),
             bool_key("nesterov", false, "Nesterov momentum (needs momentum > 0, dampening 0)")},
            {"momentum_buffer"});
  sgd.check = [](const KeyValues& v) {
    if (v.boolean("nesterov") && (v.number("momentum") <= 0 || v.number("dampening") != 0))
      v.fail("nesterov", "needs momentum > 0 and dampening = 0 (as in PyTorch)");
  };
  r.add<SgdRule>(sgd);
  r.add<AdamRule>(entry("Adam (torch.optim.Adam)",
                        adam_like(0.001, 1e-8, 0, "L2 penalty added to the gradient"), moments));
  r.add<AdamWRule>(entry("Adam with decoupled weight decay (torch.optim.AdamW)",
                         adam_like(0.001, 1e-8, 0.01, "decoupled weight decay"), moments));
  r.add<NadamRule>(entry("Adam with Nesterov momentum (Keras Nadam)",
                         adam_like(0.001, 1e-7, 0, "L2 penalty added to the gradient"), moments));
  r.add<RmspropRule>(
      entry("RMSprop (torch.optim.RMSprop)",
            {lr(0.01), scale_lr, number_key("alpha", 0.99, 0, 1, "decay of the squared average"),
             number_key("eps", 1e-8, 0, 1, "added to the denominator"),
             number_key("momentum", 0, 0, 1, "momentum factor"),
             number_key("weight_decay", 0, 0, big, "L2 penalty added to the gradient"),
             bool_key("centered", false, "normalize by the centered second moment")},
            {"square_avg", "momentum_buffer", "grad_avg"}));
  r.add<LionRule>(
      entry("Lion: the sign of an interpolated momentum (Chen et al. 2023); use a learning rate 3-10x "
            "smaller than AdamW's",
            {lr(1e-4), scale_lr, number_key("beta1", 0.9, 0, 0.999999, "interpolation of the update"),
             number_key("beta2", 0.99, 0, 0.999999, "decay of the momentum"),
             number_key("weight_decay", 0, 0, big, "decoupled weight decay")},
            {"exp_avg"}));
  r.add<LambRule>(
      entry("LAMB: Adam scaled per tensor by ||w|| / ||update|| for large batches (You et al. 2020)",
            adam_like(0.001, 1e-6, 0.01, "decoupled weight decay, inside the trust ratio"), moments));
}

}  // namespace trainer
