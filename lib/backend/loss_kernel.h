// LossKernel: a backend's implementation of a loss (lib/losses registers which losses exist, with
// their keys and targets; kernels/cpu and kernels/cuda register a kernel for each loss per backend,
// as layers' kernels are). Made once when the executor plans its steps, with the largest batch it
// will see: whatever memory it needs is taken then, never inside a step. Backend has no loss of
// its own.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "lib/backend/layer_kernel.h"
#include "lib/core/error.h"
#include "lib/core/value_loss_formula.h"

namespace trainer {

class Backend;

// What a loss on class indices takes as the model's outputs.
enum class ClassScores {
  logits,             // cross_entropy; sparse_categorical_crossentropy with from_logits: true
  probabilities,      // sparse_categorical_crossentropy (Keras clips to [eps, 1 - eps])
  log_probabilities,  // nll (PyTorch's NLLLoss after log_softmax)
};

// Everything a loss kernel is made from: the validated loss section (lib/losses) and the
// executor's shapes.
struct LossSpec {
  std::string type;  // the registry's name, which picks the kernel
  Backend* backend = nullptr;
  TargetKind target = TargetKind::class_index;
  int64_t width = 1;      // outputs per sample: classes, or K target values
  int64_t max_batch = 1;  // the largest batch run() will be given

  // Losses on class indices (int32 labels, one a sample, or one per position).
  ClassScores scores = ClassScores::logits;
  // > 1: a loss over every position of a sequence (a language model's next tokens): the outputs
  // are (batch, positions, width) logits and the labels (batch, positions); the loss is the mean
  // over the labels that are not ignore_index (PyTorch's cross_entropy on the flattened
  // positions), and the metric sums are the top-k counts, the correct predictions and the
  // labels counted (no confusion matrix: a vocabulary has too many classes for one).
  int64_t positions = 1;
  int32_t ignore_index = -100;
  float smoothing = 0.f;  // PyTorch's label_smoothing: target (1 - s) one_hot(label) + s / classes
  // Keras' class_weight (empty: none): in training runs each sample's loss and gradient times its
  // label's weight, the mean still over the batch.
  std::vector<float> class_weights;
  std::vector<int64_t> top_k;  // the top-k counts to add to the metric sums, in this order

  // Losses on float targets (K floats a sample).
  ValueLoss formula = ValueLoss::mse;
  float delta = 1.f;  // huber's
  float scale = 1.f;  // multiplies every element's loss and gradient (smooth_l1: 1 / beta)
  // bce: PyTorch's pos_weight, one per output (empty: 1 for every output).
  std::vector<float> pos_weight;
  // The metric sums per output column (lib/core/value_loss_formula.h): binary counts and score
  // histograms, or regression sums.
  bool binary_metrics = false;

  bool on_values() const { return target == TargetKind::values; }
  // The metric sums run() adds to: class indices, one count per top_k then the (C, C) confusion
  // matrix (row = label, column = argmax of the outputs); float targets, the per-column sums.
  int64_t metric_floats() const {
    if (!on_values()) return int64_t(top_k.size()) + (positions > 1 ? 2 : width * width);
    return width * (binary_metrics ? kBinarySums : kRegressionSums);
  }
};

// One launch: backend memory throughout.
struct LossRun {
  const void* out = nullptr;      // (batch, width), of `dtype`
  const void* targets = nullptr;  // int32 labels (batch, positions), or f32 values (batch, width)
  int64_t batch = 0;              // samples (a per-position loss runs batch * positions rows)
  void* dout = nullptr;           // written: d(mean loss)/d(out), (batch, width), of `dtype`
  // Elements from one row of out (and dout) to the next, where the last layer pads its rows
  // (LayerKernel::output_pitch; only for kernels that takes_pitch()); 0: the width.
  int64_t pitch = 0;
  // out's and dout's: f32, or the model output's 16-bit dtype where LossKernel::takes() it.
  DType dtype = DType::f32;
  float* loss_sum = nullptr;  // the batch's summed per-sample loss is added here
  // Not null: guard_bit is ORed into guard->nonfinite when *loss_sum is not finite afterwards.
  StepScalars* guard = nullptr;
  uint32_t guard_bit = 0;
  float* sums = nullptr;  // not null: the batch's metric sums are added (spec.metric_floats())
  bool training = false;  // class_weights apply to training runs only (validation is unweighted)

  // out and dout as f32, for kernels that take nothing else: InternalError for another dtype.
  const float* out_f32() const { return static_cast<const float*>(f32(out)); }
  float* dout_f32() const { return static_cast<float*>(const_cast<void*>(f32(dout))); }

 private:
  const void* f32(const void* p) const {
    if (dtype != DType::f32) throw InternalError("a loss kernel was given 16-bit outputs it does not take");
    return p;
  }
};

class LossKernel {
 public:
  virtual ~LossKernel() = default;
  // Backend memory the kernel needs between launches (partial sums, weights), which the
  // executor takes from its plan before the first step and hands to bind(); 0: none.
  virtual size_t scratch_bytes() const { return 0; }
  virtual void bind(void* scratch) { (void)scratch; }
  // Whether run() takes the model's outputs (and writes their gradient) in dtype t itself; f32
  // always. A 16-bit model output then needs no f32 copy (LossRun::dtype).
  virtual bool takes(DType t) const { return t == DType::f32; }
  // Whether run() reads rows of out (and writes dout's) at LossRun::pitch.
  virtual bool takes_pitch() const { return false; }
  // The mean is PyTorch's reduction 'mean': over the batch for class indices, over batch * width
  // elements for float targets (each sample's loss in loss_sum is then its row's mean), over the
  // labels counted for a per-position loss (loss_sum gets that mean times the batch).
  virtual void run(const LossRun& r) = 0;
};

using LossKernelFactory = std::function<std::unique_ptr<LossKernel>(const LossSpec&)>;

}  // namespace trainer
