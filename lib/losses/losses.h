// The loss registry: every loss's name, declared keys (lib/keys/key_spec.h), the targets it
// takes, the task it declares and the metrics that fit that task; and per loss and backend the
// kernel that runs it (lib/backend/loss_kernel.h; registered in kernels/cpu/register_cpu_kernels.cc
// and kernels/cuda/register_cuda_kernels.cc, as layers' kernels are). tests/loss_rows.h holds a
// conformance row for every registered loss.
//
// Tasks and targets:
//   classification  nll, sparse_categorical_crossentropy, cross_entropy: one class index a sample
//   regression      mse, mae (l1), huber, smooth_l1: K float targets a sample, K outputs
//   binary          binary_cross_entropy on logits with one output: a 0/1 target a sample
//   multi-label     binary_cross_entropy with K outputs: a multi-hot row of K 0/1 targets
//   tokens          cross_entropy over every position of a sequence (format text and tokens):
//                   outputs (positions, classes), one class index a position
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "datasets/dataset.h"
#include "lib/backend/backend.h"
#include "lib/backend/loss_kernel.h"
#include "lib/keys/key_spec.h"

namespace trainer {

enum class Task { classification, regression, binary, multilabel, tokens };
const char* task_name(Task t);  // "classification", "regression", "binary", "multi-label", "tokens"

// A loss section, validated: what the executor and the reports need.
struct LossConfig {
  std::string type = "sparse_categorical_crossentropy";  // the registry's name
  TargetKind target = TargetKind::class_index;
  // Losses on class indices: what the model's outputs are, and PyTorch's label_smoothing.
  ClassScores scores = ClassScores::probabilities;
  float label_smoothing = 0.f;
  // Keras' class_weight (empty: none): each training sample's loss and gradient times its class's
  // weight, the mean still over the batch; validation and eval are unweighted, as in Keras.
  std::vector<float> class_weights;
  // > 1: one class index per position of a sequence (the data's format says how many: its
  // `context`); the labels equal to ignore_index count for nothing (PyTorch's ignore_index).
  int64_t positions = 1;
  int32_t ignore_index = -100;
  // Losses on float targets.
  ValueLoss formula = ValueLoss::mse;
  float delta = 1.f, scale = 1.f;
  std::vector<float> pos_weight;  // binary_cross_entropy: one value, or one per output

  bool on_values() const { return target == TargetKind::values; }
  // The task for a model with `outputs` outputs a sample: binary_cross_entropy is binary with one
  // output, multi-label with several.
  Task task(int64_t outputs) const;
  // The kernel's spec for a model with `width` outputs a sample, adding the top-k counts named
  // (class indices only); the executor fills in the backend and the largest batch.
  LossSpec spec(int64_t width, std::vector<int64_t> top_k = {}) const;
};

struct LossEntry {
  std::string name;
  std::string doc;  // one line for the docs
  KeySpecs keys;    // every key but `type`
  TargetKind target = TargetKind::class_index;
  bool binary = false;  // binary_cross_entropy: binary or multi-label by the outputs
};

class LossRegistry {
 public:
  // Every built-in loss; the value losses' kernels join through register_backends().
  static LossRegistry& global();

  void add(LossEntry e);
  // The kernel that runs loss `loss` on `backend` ("cpu", "cuda").
  void add_kernel(const std::string& loss, const std::string& backend, LossKernelFactory make);
  bool has_kernel(const std::string& loss, const std::string& backend) const;

  const std::vector<LossEntry>& entries() const { return entries_; }
  // The entry of loss `name`; null when none is registered.
  const LossEntry* find(const std::string& name) const;
  // The loss section's keys per type, for read_variant.
  const KeyVariants& variants() const { return variants_; }
  // The kernel for spec.type on `backend`; throws ConfigError naming both when there is none.
  std::unique_ptr<LossKernel> make_kernel(const std::string& backend, const LossSpec& spec) const;

 private:
  std::vector<LossEntry> entries_;
  KeyVariants variants_;
  std::map<std::pair<std::string, std::string>, LossKernelFactory> kernels_;  // (loss, backend)
};

// The loss when the config names none.
inline constexpr const char* kDefaultLoss = "sparse_categorical_crossentropy";

// Reads a loss section (a mapping, or the `loss: mse` shortcut already expanded) with the
// registry's keys. Errors at file:line:column name the key and what is allowed.
LossConfig read_loss_config(NodeReader& r);
// The same from YAML text, e.g. "nll" or "{type: huber, delta: 0.5}" (tests, and callers that
// name a loss in code).
LossConfig loss_config(const std::string& yaml);

// The metrics that fit a task, for config checks and messages: classification accuracy,
// top_k_accuracy, precision, recall, f1; regression mae, mse, rmse, r2; binary and multi-label
// accuracy, precision, recall, f1 (micro-averaged over the labels), macro_f1, auc.
const std::vector<std::string>& task_metrics(Task t);
// The metrics a task reports when the config names none.
std::vector<std::string> default_task_metrics(Task t);

}  // namespace trainer
