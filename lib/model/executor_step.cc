// Running a step on the plans executor.cc made (lib/model/executor.h): the batch's upload, the
// forward and backward passes with their dtype conversions and gradient sums, steps recorded as
// graphs and replayed, evaluation and prediction.
#include <spdlog/spdlog.h>

#include "lib/core/bf16.h"
#include "lib/core/error.h"
#include "lib/core/fp16.h"
#include "lib/model/executor.h"
#include "lib/model/executor_plan.h"

namespace trainer {

void Executor::upload(Plan& p, int64_t batch, const float* x, const void* y, bool training, bool scalars) {
  const bool raw = training && o_.augment.active();
  Backend::UploadPiece pieces[3];
  int n = 0;
  if (scalars) pieces[n++] = {scalars_, &host_scalars_, sizeof(StepScalars)};
  if (x)
    pieces[n++] = {arena(p) + (raw ? p.raw_input : p.act[0]), x,
                   size_t(batch * model_.input_shape().numel()) * sizeof(float)};
  if (y) pieces[n++] = {arena(p) + p.labels, y, size_t(batch) * target_row_bytes()};
  be_.upload_inputs(pieces, n, landing_);
}

// Everything from the uploaded batch to the metric sums; per-step values come from scalars_.
void Executor::enqueue_forward(Plan& p, bool training, bool with_loss) {
  const auto& layers = model_.layers();
  if (training && augment_)
    augment_->run(reinterpret_cast<const float*>(arena(p) + p.raw_input),
                  reinterpret_cast<float*>(arena(p) + p.act[0]), p.batch, scalars_);
  const auto convert_forward = [&](const Edge& e) {
    be_.convert(arena(p) + e.act, e.to, arena(p) + p.act[e.tensor], e.from, e.n, false);
  };
  const bool on_logits = with_loss && p.loss_on_logits;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (!p.kernels[i]) continue;
    for (int e : p.input_edge[i])  // also for a folded last layer: its f32 input is the logits
      if (e >= 0) convert_forward(p.edges[size_t(e)]);
    if (!(on_logits && i + 1 == layers.size())) p.kernels[i]->forward(training);
  }
  if (p.output_edge >= 0 && !on_logits) convert_forward(p.edges[size_t(p.output_edge)]);
  if (!with_loss) return;
  LossRun run;
  run.out = on_logits ? static_cast<const void*>(p.logits) : arena(p) + p.out;
  run.dtype = on_logits ? DType::f32 : p.out_dtype;
  run.targets = arena(p) + p.labels;
  run.batch = p.batch;
  // on_logits is p.loss_on_logits here: with_loss holds
  run.dout = on_logits ? static_cast<void*>(p.dlogits) : arena(p) + p.out_grad;
  run.pitch = on_logits ? 0 : p.out_pitch;
  // Training: the batch's loss goes to the step's scalars first; the guard's commit adds it to the
  // epoch's sum unless the step found a non-finite value.
  run.loss_sum = training ? &scalars_->batch_loss : metrics_;
  run.guard = training ? scalars_ : nullptr;
  run.guard_bit = kNonfiniteLoss;
  run.sums = metrics_ + 1;  // the top-k counts, then the confusion matrix or the value sums
  run.training = training;
  (on_logits ? *logits_loss_ : *loss_).run(run);
  if (training) reduce_loss_flags();
}

void Executor::enqueue_backward_and_update(Plan& p, bool update, bool first_micro_batch) {
  const auto& layers = model_.layers();
  const bool on_logits = p.loss_on_logits;
  if (scaler_) loss_scale_->scale(loss_gradient(p), p.batch * loss_width(), scaler_);
  if (p.output_edge >= 0 && !on_logits) {  // the loss's f32 gradient into the output's dtype
    const Edge& e = p.edges[size_t(p.output_edge)];
    be_.convert(arena(p) + p.grad[e.tensor], e.from, arena(p) + e.grad, e.to, e.n, false);
  }
  size_t buckets_launched = 0;
  for (size_t i = layers.size(); i-- > 0;) {
    // Layer i's parameter gradients are complete once its backward ran (f32 in every math mode:
    // kernels write them into the arena themselves, or with micro-batches into the scratch that
    // gather_gradients copies or adds there); the conversions below touch activations only.
    if (overlapped() && i + 1 < layers.size()) launch_ready_buckets(i + 1, &buckets_launched);
    if (!p.kernels[i]) continue;
    if (!(on_logits && i + 1 == layers.size())) {
      p.kernels[i]->backward();
      gather_gradients(p, i, first_micro_batch);
    }
    for (size_t k = 0; k < p.input_grads[i].size(); ++k) {
      const InputGrad& g = p.input_grads[i][k];
      if (!g.wanted) continue;
      char* grad = arena(p) + p.grad[g.tensor];
      const DType dt = p.dtype[g.tensor];
      if (g.converted) {
        const Edge& e = p.edges[size_t(p.input_edge[i][k])];
        be_.convert(grad, dt, arena(p) + e.grad, e.to, g.floats, g.accumulate);
      } else if (g.scratch) {
        be_.convert(grad, dt, arena(p) + p.scratch, dt, g.floats, true);
      }
    }
  }
  if (update) enqueue_update(p.batch, buckets_launched);
}

// Runs `enqueue` eagerly the first time (libraries finish their lazy setup there), records it
// as a graph the second time, and replays the graph from then on. A failed capture turns graphs
// off for this executor with a warning, and the step runs eagerly.
void Executor::run_captured(int& graph, int& eager_runs, const std::function<void()>& enqueue) {
  // A host all-reduce (CPU ranks over MPI) cannot be part of a graph; a device collective's can.
  const bool capture = o_.use_graphs && be_.supports_capture() && !grad_hook_ && !host_reduce();
  if (capture && graph >= 0) {
    // The recording names the collective's communicator: not after another replica aborted it.
    if (o_.collective) o_.collective->check_alive();
    be_.replay(graph);
    return;
  }
  if (!capture || eager_runs++ < 1) {
    enqueue();
    return;
  }
  try {
    be_.begin_capture();
    enqueue();
    graph = be_.end_capture();
  } catch (const Error& e) {
    be_.abort_capture();
    o_.use_graphs = false;
    spdlog::warn("step capture as a CUDA graph failed, running steps eagerly: {}", e.what());
    enqueue();
    return;
  }
  be_.replay(graph);
}

void Executor::run_stage_captured(Plan& p, int piece, const std::function<void()>& enqueue) {
  if (piece < 0 || piece >= kStagePieces) throw InternalError("no stage piece " + std::to_string(piece));
  run_captured(p.stage_graph[piece], p.stage_eager_runs[piece], enqueue);
}

void Executor::train_step(int64_t batch, const float* x, const void* y, int64_t t, float lr,
                          int64_t global_batch) {
  const ProfileRange range(be_, "train_step");
  opt_.prepare(host_scalars_, t, lr);
  host_scalars_.seed = o_.seed;
  global_batch_ = global_batch;
  host_scalars_.shard_weight = global_batch > 0 ? float(double(batch) / double(global_batch)) : 1.f;
  if (batch == 0) {  // an empty shard: no forward or backward, zero gradients into the all-reduce
    be_.copy_to_device(scalars_, &host_scalars_, sizeof(StepScalars));
    be_.zero(grads_, size_t(n_param_floats_) * sizeof(float));
    if (o_.sync_batchnorm)
      enqueue_no_rows_step();
    else
      enqueue_update(0);
    return;
  }
  Plan& p = plan_for(batch);
  upload(p, batch, x, y, true, true);
  run_captured(p.train_graph, p.train_eager_runs, [&] {
    enqueue_forward(p, true, true);
    enqueue_backward_and_update(p);
  });
  samples_ += batch;
}

void Executor::eval_step(int64_t batch, const float* x, const void* y) {
  if (batch == 0) return;
  Plan& p = plan_for(batch);
  const ProfileRange range(be_, "eval_step");
  upload(p, batch, x, y);
  run_captured(p.eval_graph, p.eval_eager_runs, [&] { enqueue_forward(p, false, true); });
  samples_ += batch;
}

void Executor::predict(int64_t batch, const float* x, float* out) {
  Plan& p = plan_for(batch);
  upload(p, batch, x, nullptr);
  enqueue_forward(p, false, false);
  const size_t n = size_t(batch * model_.output_shape().numel());
  if (p.out_dtype == DType::f32) {
    be_.copy_to_host(out, arena(p) + p.out, n * sizeof(float));
    return;
  }
  // A 16-bit output the loss reads as it is: widened here, exactly (rows at the last layer's
  // pitch, where it pads them, to packed ones).
  const Shape& shape = model_.output_shape();  // a row: its last dimension (dense's units)
  const size_t width = shape.rank() > 0 ? size_t(shape[shape.rank() - 1]) : 1;
  const size_t rows = width ? n / width : 0, pitch = p.out_pitch ? size_t(p.out_pitch) : width;
  std::vector<uint16_t> half(p.out_pitch ? rows * pitch : n);
  be_.copy_to_host(half.data(), arena(p) + p.out, half.size() * sizeof(uint16_t));
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = p.out_pitch ? half[i / width * pitch + i % width] : half[i];
    out[i] = p.out_dtype == DType::bf16 ? float_from_bf16(h) : float_from_f16(h);
  }
}

Executor::StageTensors Executor::stage_tensors_of(const Plan& p) const {
  StageTensors t;
  t.input = reinterpret_cast<float*>(arena(p) + p.act[0]);
  if (o_.input_gradient) t.input_grad = reinterpret_cast<float*>(arena(p) + p.grad[0]);
  t.output = reinterpret_cast<float*>(arena(p) + p.out);
  t.output_grad = reinterpret_cast<float*>(arena(p) + p.out_grad);
  return t;
}

float* Executor::loss_gradient(const Plan& p) const {
  if (!p.loss_on_logits && p.out_dtype != DType::f32)
    throw InternalError("the loss's gradient is " + std::string(dtype_name(p.out_dtype)) + ", not f32");
  return p.loss_on_logits ? p.dlogits : reinterpret_cast<float*>(arena(p) + p.out_grad);
}

}  // namespace trainer
