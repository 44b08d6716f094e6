// StepRunner: what the training loop, evaluation and checkpoints drive. One Executor (the whole
// model on one backend, lib/model/executor.h) or a Pipeline (consecutive stages of the model, each
// an Executor on its own backend, lib/model/pipeline.h).
//
// Host copies of parameters, buffers and optimizer state are always laid out for the whole model
// (Model::params(), Model::buffers()), so checkpoints do not depend on how the model is split.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lib/backend/backend.h"
#include "lib/backend/step_kernels.h"

namespace trainer {

// Sums accumulated on the device since reset_metrics().
struct MetricSums {
  double loss_sum = 0;
  int64_t samples = 0;
  std::vector<double> confusion;  // (C, C): row = label, column = prediction
  std::vector<double> topk;       // per options.top_k entry: correct count
  // Training steps that found a non-finite loss, gradient or weight (lib/backend/backend.h): their
  // updates were skipped and their losses left out of loss_sum (their samples are in `samples`).
  NonfiniteRecord nonfinite;
};

class StepRunner {
 public:
  virtual ~StepRunner() = default;

  // Host <-> backend copies of the whole model's parameter and buffer arenas (checkpoints, init).
  virtual void upload_params(const float* params, const float* buffers) = 0;
  virtual void download_params(float* params, float* buffers) = 0;
  // The buffer arena alone (batchnorm running statistics).
  virtual void upload_buffers(const float* buffers) = 0;
  virtual void download_buffers(float* buffers) = 0;
  // Optimizer state as n_state * (the whole model's param_arena_floats) floats.
  virtual int64_t optimizer_state_floats() const = 0;
  virtual void upload_optimizer_state(const float* state) = 0;
  virtual void download_optimizer_state(float* state) = 0;

  // x: (batch, input...) host floats, y: (batch) labels; lr and the update counter t (1-based).
  // Data parallel (Executor only): `batch` is this rank's shard of a batch of `global_batch` rows.
  virtual void train_step(int64_t batch, const float* x, const void* y, int64_t t, float lr,
                          int64_t global_batch = 0) = 0;
  virtual void eval_step(int64_t batch, const float* x, const void* y) = 0;
  // Forward only, copies the model output (batch, out...) to host memory.
  virtual void predict(int64_t batch, const float* x, float* out) = 0;

  virtual void reset_metrics() = 0;
  virtual MetricSums read_metrics() = 0;  // synchronizes
  virtual void restore_metrics(const MetricSums& m) = 0;

  // Device bytes planned before the first step (every backend together).
  virtual size_t planned_bytes() const = 0;
  virtual ClipRecord read_clip_record() = 0;
  virtual bool loss_scaling() const = 0;
  virtual LossScaleState read_loss_scale() = 0;
  virtual void restore_loss_scale(const LossScaleState& st) = 0;
  // Host-side optimizer scalars (Nadam's momentum product) that travel with checkpoints.
  virtual StepScalars& host_scalars() = 0;
};

}  // namespace trainer
