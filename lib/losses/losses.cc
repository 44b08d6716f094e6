#include "lib/losses/losses.h"

#include <yaml-cpp/yaml.h>

#include "lib/core/error.h"
#include "lib/keys/node_reader.h"

namespace trainer {
namespace {

KeySpec class_weights_key() {
  return number_list_key(
      "class_weights", {}, 0.0, 1e12,
      "one weight per class, Keras' class_weight: each training sample's loss and gradient "
      "times its class's weight (validation unweighted)");
}

KeySpec smoothing_key() {
  return number_key("label_smoothing", 0.0, 0.0, 1.0,
                    "PyTorch's label_smoothing: the target is (1 - s) one_hot(label) + s / num_classes");
}

KeySpec ignore_index_key() {
  return integer_key("ignore_index", -100, -(int64_t(1) << 31), (int64_t(1) << 31) - 1,
                     "PyTorch's ignore_index, for losses over every position (format text, tokens): labels "
                     "equal to it add nothing to the loss, its gradient or the metrics");
}

void register_builtin_losses(LossRegistry& r) {
  r.add({"sparse_categorical_crossentropy",
         "Keras' loss on class indices; from_logits: false takes probabilities (a softmax output)",
         {bool_key("from_logits", false, "the model outputs logits rather than probabilities"),
          smoothing_key(), class_weights_key(), ignore_index_key()},
         TargetKind::class_index});
  r.add({"cross_entropy",
         "PyTorch's CrossEntropyLoss on class indices: the model outputs logits",
         {bool_key("from_logits", true, "the model outputs logits (PyTorch's loss always takes logits)"),
          smoothing_key(), class_weights_key(), ignore_index_key()},
         TargetKind::class_index});
  r.add({"nll",
         "PyTorch's NLLLoss on class indices: the model outputs log-probabilities (log_softmax)",
         {smoothing_key(), class_weights_key()},
         TargetKind::class_index});
  r.add({"mse", "mean squared error on float targets (PyTorch's MSELoss)", {}, TargetKind::values});
  r.add({"mae", "mean absolute error on float targets (PyTorch's L1Loss)", {}, TargetKind::values});
  r.add({"l1", "the same as mae", {}, TargetKind::values});
  r.add({"huber",
         "PyTorch's HuberLoss: 0.5 e^2 where |e| <= delta, else delta (|e| - 0.5 delta)",
         {number_key("delta", 1.0, 1e-12, 1e12, "where the loss turns from squared to linear")},
         TargetKind::values});
  r.add({"smooth_l1",
         "PyTorch's SmoothL1Loss: huber with delta = beta, divided by beta",
         {number_key("beta", 1.0, 1e-12, 1e12, "where the loss turns from squared to linear")},
         TargetKind::values});
  r.add({"binary_cross_entropy",
         "PyTorch's BCEWithLogitsLoss on 0/1 targets: one output (binary) or K (multi-label), logits",
         {number_list_key(
             "pos_weight", {}, 0.0, 1e12,
             "weight of the positive targets, one value or one per output (PyTorch's pos_weight)")},
         TargetKind::values,
         true});
}

std::vector<float> floats(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

}  // namespace

const char* task_name(Task t) {
  switch (t) {
    case Task::classification:
      return "classification";
    case Task::regression:
      return "regression";
    case Task::binary:
      return "binary";
    case Task::multilabel:
      return "multi-label";
    case Task::tokens:
    default:
      return "tokens";
  }
}

Task LossConfig::task(int64_t outputs) const {
  if (!on_values()) return positions > 1 ? Task::tokens : Task::classification;
  if (formula != ValueLoss::bce_logits) return Task::regression;
  return outputs == 1 ? Task::binary : Task::multilabel;
}

LossRegistry& LossRegistry::global() {
  static LossRegistry* r = [] {
    auto* reg = new LossRegistry;
    register_builtin_losses(*reg);
    return reg;
  }();
  return *r;
}

const LossEntry* LossRegistry::find(const std::string& name) const {
  for (const LossEntry& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

void LossRegistry::add(LossEntry e) {
  if (find(e.name)) throw InternalError("loss '" + e.name + "' registered twice");
  variants_.push_back({e.name, e.keys, e.doc});
  entries_.push_back(std::move(e));
}

void LossRegistry::add_kernel(const std::string& loss, const std::string& backend, LossKernelFactory make) {
  if (!find(loss))
    throw InternalError("a " + backend + " kernel for loss '" + loss + "', which is not registered");
  kernels_[{loss, backend}] = std::move(make);
}

bool LossRegistry::has_kernel(const std::string& loss, const std::string& backend) const {
  return kernels_.count({loss, backend}) != 0;
}

std::unique_ptr<LossKernel> LossRegistry::make_kernel(const std::string& backend,
                                                      const LossSpec& spec) const {
  const auto it = kernels_.find({spec.type, backend});
  if (it == kernels_.end())
    throw ConfigError("loss '" + spec.type + "' has no kernel on the " + backend + " backend");
  return it->second(spec);
}

LossSpec LossConfig::spec(int64_t width, std::vector<int64_t> top_k) const {
  LossSpec s;
  s.type = type;
  s.target = target;
  s.width = width;
  if (!on_values()) {
    s.scores = scores;
    s.smoothing = label_smoothing;
    s.class_weights = class_weights;
    s.top_k = std::move(top_k);
    s.positions = positions;
    s.ignore_index = ignore_index;
    return s;
  }
  s.formula = formula;
  s.delta = delta;
  s.scale = scale;
  s.pos_weight = pos_weight;
  s.binary_metrics = formula == ValueLoss::bce_logits;
  return s;
}

LossConfig read_loss_config(NodeReader& r) {
  const LossRegistry& reg = LossRegistry::global();
  const KeyValues v = read_variant(r, "type", kDefaultLoss, reg.variants());
  LossConfig c;
  c.type = v.string("type");
  const LossEntry* e = reg.find(c.type);
  if (!e) throw InternalError("loss '" + c.type + "' passed validation but is not registered");
  c.target = e->target;
  if (!c.on_values()) {
    if (c.type == "nll")
      c.scores = ClassScores::log_probabilities;
    else
      c.scores = v.boolean("from_logits") ? ClassScores::logits : ClassScores::probabilities;
    c.label_smoothing = float(v.number("label_smoothing"));
    if (v.has("class_weights")) c.class_weights = floats(v.numbers("class_weights"));
    if (v.has("ignore_index")) c.ignore_index = int32_t(v.integer("ignore_index"));
    return c;
  }
  if (c.type == "mse") {
    c.formula = ValueLoss::mse;
  } else if (c.type == "mae" || c.type == "l1") {
    c.formula = ValueLoss::mae;
  } else if (c.type == "huber") {
    c.formula = ValueLoss::huber;
    c.delta = float(v.number("delta"));
  } else if (c.type == "smooth_l1") {
    c.formula = ValueLoss::huber;
    c.delta = float(v.number("beta"));
    c.scale = 1.f / c.delta;
  } else {
    c.formula = ValueLoss::bce_logits;
    if (v.has("pos_weight")) c.pos_weight = floats(v.numbers("pos_weight"));
  }
  return c;
}

LossConfig loss_config(const std::string& yaml) {
  YAML::Node n = YAML::Load(yaml);
  if (n.IsScalar()) {  // the `loss: mse` shortcut
    YAML::Node m;
    m["type"] = n.as<std::string>();
    n = m;
  }
  NodeReader r(n, "loss", "<code>");
  LossConfig c = read_loss_config(r);
  r.finish();
  return c;
}

const std::vector<std::string>& task_metrics(Task t) {
  static const std::vector<std::string> classification{"accuracy", "top_k_accuracy", "precision", "recall",
                                                       "f1"};
  static const std::vector<std::string> regression{"mae", "mse", "rmse", "r2"};
  static const std::vector<std::string> binary{"accuracy", "precision", "recall", "f1", "macro_f1", "auc"};
  static const std::vector<std::string> tokens{"accuracy", "perplexity"};
  switch (t) {
    case Task::classification:
      return classification;
    case Task::tokens:
      return tokens;
    case Task::regression:
      return regression;
    default:
      return binary;
  }
}

std::vector<std::string> default_task_metrics(Task t) {
  switch (t) {
    case Task::classification:
      return {"accuracy"};
    case Task::regression:
      return {"mae", "rmse", "r2"};
    case Task::tokens:
      return {"accuracy", "perplexity"};
    default:
      return {"accuracy", "f1", "auc"};
  }
}

}  // namespace trainer
