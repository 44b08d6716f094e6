// Executor as one stage of a pipeline (lib/model/pipeline.h): the pieces of a training step that
// Executor::train_step runs in one go, one micro-batch at a time, so that the pipeline can hand
// the boundary tensors between stages in between. The plans, arenas and kernels are the ones the
// constructor made; ExecutorOptions says which stage this is (input_gradient,
// output_gradient_given, first_layer) and how many micro-batches are in flight
// (activation_slots).
#include "lib/core/error.h"
#include "lib/model/executor.h"

namespace trainer {

Executor::StageTensors Executor::stage_tensors(int64_t batch, int slot) {
  return stage_tensors_of(plan_for(batch, slot));
}

void Executor::stage_begin_step(int64_t t, float lr, const std::vector<float>& micro_weights) {
  opt_.prepare(host_scalars_, t, lr);
  host_scalars_.seed = o_.seed;
  host_scalars_.shard_weight = 1.f;
  be_.copy_to_device(scalars_, &host_scalars_, sizeof(StepScalars));
  if (!micro_weights_ || o_.output_gradient_given) return;
  if (micro_weights.size() > size_t(o_.activation_slots))
    throw InternalError("a step of " + std::to_string(micro_weights.size()) + " micro-batches, " +
                        std::to_string(o_.activation_slots) + " activation slots");
  // The scale of a LossScaleState is what LossScaleKernel::scale multiplies by.
  std::vector<LossScaleState>& w = micro_weights_host_;  // activation_slots long, sized once
  for (size_t k = 0; k < w.size(); ++k) {
    const float x = k < micro_weights.size() ? micro_weights[k] : 0.f;
    w[k].scale = x;
    w[k].inv_scale = x > 0 ? 1.f / x : 0.f;
  }
  be_.copy_to_device(micro_weights_, w.data(), w.size() * sizeof(LossScaleState));
}

void Executor::stage_upload(int64_t batch, int slot, const float* x, const void* y, bool training) {
  upload(plan_for(batch, slot), batch, x, y, training);
}

void Executor::stage_forward(int64_t batch, int slot, bool training, bool with_loss) {
  Plan& p = plan_for(batch, slot);
  with_loss = with_loss && !o_.output_gradient_given;
  // Recorded once per plan (micro-batch slot and size) and way of running, like a whole step:
  // the launches of a micro-batch's forward are one graph launch, so the host keeps ahead of the
  // devices and the stages overlap. The boundary copies and their events stay outside.
  run_stage_captured(p, 2 * int(training) + int(with_loss), [&] { enqueue_forward(p, training, with_loss); });
  if (!training && with_loss) samples_ += batch;
}

// The gradient of the batch's mean loss is the sum over micro-batches of (rows_m / rows) times
// the gradient of micro-batch m's mean loss: the loss stage scales each micro-batch's loss
// gradient by its weight before the backward pass (the stages before it receive gradients so
// scaled), and every stage sums the parameter gradients in the arena in the order the
// micro-batches run: each layer's backward writes its gradients into the scratch, which the
// step's first micro-batch copies into the arena and each later one adds (gather_gradients).
void Executor::stage_backward(int64_t batch, int slot, int index, int count) {
  Plan& p = plan_for(batch, slot);
  if (count > 1 && !grad_scratch_)
    throw InternalError("micro-batches without a gradient scratch (activation_slots is 1)");
  const bool scaled = count > 1 && !o_.output_gradient_given;
  const bool first = index == 0;
  run_stage_captured(p, 4 + int(scaled) + 2 * int(first), [&] {
    if (scaled) loss_scale_->scale(loss_gradient(p), batch * loss_width(), micro_weights_ + slot);
    enqueue_backward_and_update(p, /*update=*/false, first);
  });
}

void Executor::stage_clip_partials(int stage) {
  if (!clip_ || stage >= o_.clip_stages) throw InternalError("stage_clip_partials without clip_stages");
  clipper_->sum_squares(grads_, n_param_floats_, clip_partials_ + size_t(stage) * kClipPartials);
}

void Executor::stage_clip() {
  if (!clipper_) throw InternalError("stage_clip without clip_grad_norm");
  clipper_->by_partials(grads_, n_param_floats_, clip_partials_, o_.clip_stages, clip_);
}

void Executor::stage_update(int64_t batch) {
  enqueue_update(batch);
  samples_ += batch;
}

}  // namespace trainer
