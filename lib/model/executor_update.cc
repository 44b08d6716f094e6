// Executor: the end of a training step. Gradients summed over data-parallel ranks (on the host
// for CPU ranks, by the device collective's buckets on GPUs), then loss-scale unscaling, clipping,
// the non-finite guard, the optimizer and the step's commit, all enqueued on the backend's stream.
#include "lib/model/executor.h"

namespace trainer {

void Executor::launch_ready_buckets(size_t layer, size_t* next) {
  for (; *next < buckets_.size() && buckets_[*next].ready_after >= layer; ++*next) {
    const GradientBucket& b = buckets_[*next];
    o_.collective->all_reduce_sum_async(grads_ + b.begin, b.floats(), /*weighted=*/true);
  }
}

// Rank r's gradients are the mean over its shard's n_r rows; the global batch's mean is the sum
// over ranks of (n_r / N) * mean_r. The loss's non-finite flag is ORed too, so that every rank
// skips or applies the same update. Host memory, after the backend's queued work: this sum cannot
// overlap the backward pass, so it stays one all-reduce of the whole arena (no buckets).
void Executor::reduce_gradients(int64_t batch) {
  be_.synchronize();
  const float weight = global_batch_ > 0 ? float(double(batch) / double(global_batch_)) : 1.f;
  if (weight != 1.f)
    for (int64_t i = 0; i < n_param_floats_; ++i) grads_[i] *= weight;
  o_.comm->all_reduce_sum(grads_, n_param_floats_);
  o_.comm->all_reduce_or(&scalars_->nonfinite, 1);
}

// The same on the device (ExecutorOptions::collective): every replica's gradients times its
// shard weight (StepScalars::shard_weight, uploaded with the step's scalars), summed over the
// replicas, the loss's flags ORed since the forward pass (reduce_loss_flags) joined; all enqueued
// on the stream, so nothing waits and a recorded step replays it. One bucket: one all-reduce of the whole
// arena on the stream, after the backward pass. Several: the buckets the backward pass did not launch yet
// (all of them for an empty shard, which runs no backward pass, so every replica makes the same calls), then
// the join.
void Executor::reduce_gradients_on_device(size_t buckets_launched) {
  reduce_loss_flags();  // an empty shard's step, which has no loss: the same calls in the same order
  loss_flags_reduced_ = false;
  if (overlapped()) {
    launch_ready_buckets(0, &buckets_launched);
    o_.collective->wait_all();
  } else {
    o_.collective->wait_all();
    o_.collective->all_reduce_sum(grads_, n_param_floats_, /*weighted=*/true);
  }
}

// The flags a step can set before its gradients are summed come from its own loss (those set
// after, by the checks of the summed gradients and of the weights, are the same on every replica):
// ORed over the replicas as soon as the loss is known, beside the backward pass, instead of as one
// more collective between the gradients' sum and the update (~10 us of NCCL latency a step).
void Executor::reduce_loss_flags() {
  if (!o_.collective || loss_flags_reduced_) return;
  o_.collective->all_reduce_or_async(&scalars_->nonfinite);
  loss_flags_reduced_ = true;
}

// Synchronized batchnorm makes collectives inside the forward and backward passes, and the other
// replicas wait for an empty shard's share of each: its kernels make the same calls with zeros
// (LayerKernel::forward_no_rows, backward_no_rows), and the gradient buckets are launched between
// them exactly where enqueue_backward_and_update launches them, since the communicator must see
// the same sequence of collectives on every replica. The kernels of any plan serve: they read no
// rows. Not recorded as a graph (the steps with rows are).
void Executor::enqueue_no_rows_step() {
  const Plan& p = plan_for(o_.batch_sizes[0]);
  const size_t n = model_.layers().size();
  for (size_t i = 0; i < n; ++i)
    if (LayerKernel* k = kernel(p, i)) k->forward_no_rows();
  reduce_loss_flags();  // where a replica with rows reduces its loss's flags
  size_t buckets_launched = 0;
  for (size_t i = n; i-- > 0;) {
    if (overlapped() && i + 1 < n) launch_ready_buckets(i + 1, &buckets_launched);
    if (LayerKernel* k = kernel(p, i)) k->backward_no_rows();
  }
  enqueue_update(0, buckets_launched);
}

void Executor::enqueue_update(int64_t batch, size_t buckets_launched) {
  if (o_.collective)
    reduce_gradients_on_device(buckets_launched);
  else if (data_parallel())
    reduce_gradients(batch);
  // Loss scaling: the true gradients again, and an overflow flagged (the unscale checks every
  // gradient, so the plain gradient check below would only repeat it). The scale changes on the
  // device after the update, as GradScaler.update() does after optimizer.step().
  if (scaler_) loss_scale_->unscale(grads_, n_param_floats_, scaler_, scalars_);
  if (grad_hook_) grad_hook_(grads_);
  // Clipping: the norm and the factor; the optimizer step scales the gradients as it reads them
  // where it can (grad_scale_in_step_), else the clip scales the arena. Pipeline stages clip over
  // every stage first (stage_clip).
  // The non-finite guard: the update is skipped on the device when the loss or a gradient is not
  // finite (the norm_only clip checks them as it sums their squares); weights are checked after
  // it; the host reads the record only with the metrics.
  if (clip_ && grad_scale_in_step_)
    clipper_->norm_only(grads_, n_param_floats_, clip_partials_, clip_, scalars_, kNonfiniteGradients);
  else if (clip_ && !o_.clip_stages)
    clipper_->clip(grads_, n_param_floats_, clip_partials_, clip_);
  if (!scaler_ && !(clip_ && grad_scale_in_step_))
    guard_->check(grads_, n_param_floats_, kNonfiniteGradients, scalars_);
  opt_step_->step(params_, grads_, state_.data(), scalars_);  // checks the weights after it
  if (!low_copy_in_step_) refresh_low_precision_params();
  if (scaler_) loss_scale_->update(scaler_, scalars_);
  guard_->commit(scalars_, batch, metrics_, nonfinite_);
}

}  // namespace trainer
