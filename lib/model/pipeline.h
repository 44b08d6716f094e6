// Pipeline: model parallelism. The layers of a model split into consecutive stages
// (model.stages), each stage an Executor over its own layers on its own backend (a GPU each, or
// several stages on one GPU or on the CPU), with its own arenas sized before the first step and
// its own optimizer state. A training step is GPipe's:
//
//   the batch is cut into M micro-batches (pipeline.micro_batches; rows differ by at most one);
//   forward:  micro-batch by micro-batch, stage by stage: stage k's output is copied into stage
//             k+1's input (a peer copy between GPUs, ordered by an event: no host wait), so on
//             GPUs stage k computes micro-batch m+1 while stage k+1 computes m;
//   backward: in reverse, the gradient of each stage's input copied back into the previous
//             stage's output gradient; each stage sums its parameter gradients over the
//             micro-batches, the loss of micro-batch m weighted by rows_m / rows, so the sum is the
//             gradient of the batch's mean loss;
//   update:   clip_grad_norm by the norm over every stage's gradients (each stage's partial sums
//             copied to the others); one optimizer step per stage, after the loss stage's
//             non-finite verdict reached it.
//
// Each micro-batch in flight has its own activation slot in every stage (activation memory is
// that of the whole batch, as in GPipe without re-materialization). The loss and the metrics are
// on the last stage. Host copies of parameters, buffers and optimizer state are the whole model's
// (StepRunner), so checkpoints have the single-stage names and layout.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/model/executor.h"
#include "lib/model/model.h"

namespace trainer {

// The index (in Model::layers(), run order) of the first layer of each stage after the first,
// from model.stages' layer names. ConfigError for an unknown name (the closest is named), the
// first layer, a repeat, or names out of run order.
std::vector<size_t> stage_starts(const Model& whole, const std::vector<std::string>& names);

// One stage: layers [begin, end) of the whole model on its own backend.
struct PipelineStage {
  size_t begin = 0, end = 0;
  std::unique_ptr<Model> model;  // Model(whole, begin, end): the same layer and tensor names
  std::unique_ptr<Backend> backend;
  std::string device;  // "cpu", "gpu:1": for the memory report
};

class Pipeline : public StepRunner {
 public:
  // `whole` (kept by reference) names and lays out the host copies; `options` are the whole
  // model's (batch_sizes: the batches' rows, each cut into micro_batches here). ConfigError for
  // what a split model cannot do yet (loss scaling over several stages).
  Pipeline(const Model& whole, std::vector<PipelineStage> stages, const Optimizer& optimizer,
           const ExecutorOptions& options, int micro_batches);
  ~Pipeline() override;

  void upload_params(const float* params, const float* buffers) override;
  void download_params(float* params, float* buffers) override;
  void upload_buffers(const float* buffers) override;
  void download_buffers(float* buffers) override;
  int64_t optimizer_state_floats() const override;
  void upload_optimizer_state(const float* state) override;
  void download_optimizer_state(float* state) override;

  // global_batch is ignored: a pipeline is one replica (data parallelism is refused).
  void train_step(int64_t batch, const float* x, const void* y, int64_t t, float lr,
                  int64_t global_batch = 0) override;
  void eval_step(int64_t batch, const float* x, const void* y) override;
  void predict(int64_t batch, const float* x, float* out) override;

  void reset_metrics() override;
  MetricSums read_metrics() override;
  void restore_metrics(const MetricSums& m) override;

  size_t planned_bytes() const override;
  ClipRecord read_clip_record() override;
  bool loss_scaling() const override;
  LossScaleState read_loss_scale() override;
  void restore_loss_scale(const LossScaleState& st) override;
  StepScalars& host_scalars() override;

  size_t stage_count() const { return stages_.size(); }
  int micro_batches() const { return micro_; }
  const PipelineStage& stage(size_t k) const { return stages_[k]; }
  Executor& executor(size_t k) { return *executors_[k]; }
  // One line per stage: its layers, device, parameter, activation and total MiB reserved.
  std::vector<std::string> memory_report() const;
  // The devices of the stages, "cpu" or "gpu:0,1".
  std::string devices() const;
  // The peak bytes of every stage's backend, summed.
  size_t peak_bytes() const;

 private:
  // Where each tensor of a stage's arena is in the whole model's arena (floats).
  struct Slice {
    int64_t whole = 0, stage = 0, n = 0;
  };
  // Tensor by tensor: the whole model's host arena into a stage's (to_stage), and back (to_whole).
  static void to_stage(const std::vector<Slice>& slices, const float* whole, float* stage);
  static void to_whole(const std::vector<Slice>& slices, const float* stage, float* whole);
  // The micro-batches of a batch of `rows`: min(M, rows) of them, rows differing by at most one,
  // and each one's weight in the batch's mean loss (its rows / rows).
  struct Split {
    std::vector<std::pair<int64_t, int64_t>> parts;  // (first row, rows)
    std::vector<float> weights;
  };
  Split split(int64_t rows) const;
  // The split of a planned batch size, made before the first step (a step allocates nothing).
  const Split& split_of(int64_t rows) const;
  // Micro-batch `slot`'s boundary tensor from stage k-1 to stage k, or its gradient back.
  void hand_forward(size_t k, int64_t rows, int slot);
  void hand_backward(size_t k, int64_t rows, int slot);
  void clip_over_stages();
  const void* target_rows(const void* y, int64_t first) const;
  void forward_all(int64_t batch, const float* x, const void* y, bool training, bool with_loss, float* out);

  const Model& whole_;
  std::vector<PipelineStage> stages_;
  std::vector<std::unique_ptr<Executor>> executors_;
  std::vector<std::vector<Slice>> params_, buffers_;
  int micro_ = 1;
  std::map<int64_t, Split> splits_;  // by batch size (ExecutorOptions::batch_sizes)
  int state_slots_ = 0;
  bool clip_stages_ = false;  // clip_grad_norm over several stages
};

}  // namespace trainer
