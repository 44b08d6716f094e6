// Executor: what crosses between the host and the backend outside a step: parameters, buffers and
// optimizer state (checkpoints, replicas' start-up), and the epoch's metric sums, loss scale and
// clipping record. Every read waits for the backend's queued work.
#include <vector>

#include "lib/model/executor.h"

namespace trainer {

void Executor::upload_params(const float* params, const float* buffers) {
  be_.copy_to_device(params_, params, size_t(n_param_floats_) * sizeof(float));
  refresh_low_precision_params();
  upload_buffers(buffers);
}

// The 16-bit copy of the parameters (ExecutorOptions::low_precision_params) from the f32 ones,
// on the backend's queue: after an upload, and after each update inside the step.
void Executor::refresh_low_precision_params() {
  if (!params_low_) return;
  be_.convert(params_low_, params_low_dtype_, params_, DType::f32, n_param_floats_, false);
  for (const LowFilterLayout& f : low_filters_)
    be_.convert_filter_krsc(static_cast<char*>(params_low_) + size_t(f.offset) * 2, params_low_dtype_,
                            params_ + f.offset, f);
}

void Executor::download_params(float* params, float* buffers) {
  be_.copy_to_host(params, params_, size_t(n_param_floats_) * sizeof(float));
  if (buffers) download_buffers(buffers);
  check_collective();
}

// After a read from the device: steps whose all-reduce was cut short by an abort (another replica
// failed) ran on partial sums, so what was read is not the training's; throws WorldStopped then.
void Executor::check_collective() const {
  if (o_.collective) o_.collective->check_alive();
}

void Executor::upload_buffers(const float* buffers) {
  if (model_.buffer_arena_floats())
    be_.copy_to_device(buffers_, buffers, size_t(model_.buffer_arena_floats()) * sizeof(float));
}

void Executor::download_buffers(float* buffers) {
  if (model_.buffer_arena_floats())
    be_.copy_to_host(buffers, buffers_, size_t(model_.buffer_arena_floats()) * sizeof(float));
}

int64_t Executor::optimizer_state_floats() const { return int64_t(opt_.state_slots()) * n_param_floats_; }

// Host copies hold the state slots' arenas one after another, as on the backend.
void Executor::upload_optimizer_state(const float* state) {
  for (size_t k = 0; k < state_.size(); ++k)
    be_.copy_to_device(state_[k], state + k * size_t(n_param_floats_),
                       size_t(n_param_floats_) * sizeof(float));
}

void Executor::download_optimizer_state(float* state) {
  for (size_t k = 0; k < state_.size(); ++k)
    be_.copy_to_host(state + k * size_t(n_param_floats_), state_[k], size_t(n_param_floats_) * sizeof(float));
}

size_t Executor::metric_floats() const {
  return 1 + size_t(o_.loss.spec(o_.num_classes, o_.top_k).metric_floats());
}

void Executor::reset_metrics() {
  const size_t n = metric_floats();
  be_.zero(metrics_, n * sizeof(float));
  be_.zero(nonfinite_, sizeof(NonfiniteRecord));
  samples_ = 0;
}

void Executor::restore_metrics(const MetricSums& m) {
  const size_t n = metric_floats();
  std::vector<float> host(n, 0.f);
  host[0] = float(m.loss_sum);  // the sums were read from these floats: exact
  for (size_t k = 0; k < o_.top_k.size() && k < m.topk.size(); ++k) host[1 + k] = float(m.topk[k]);
  for (size_t i = 0; i + 1 + o_.top_k.size() < n && i < m.confusion.size(); ++i)
    host[1 + o_.top_k.size() + i] = float(m.confusion[i]);
  be_.copy_to_device(metrics_, host.data(), n * sizeof(float));
  be_.copy_to_device(nonfinite_, &m.nonfinite, sizeof(NonfiniteRecord));
  samples_ = m.samples;
}

LossScaleState Executor::read_loss_scale() {
  LossScaleState st;
  if (scaler_) be_.copy_to_host(&st, scaler_, sizeof st);
  return st;
}

void Executor::restore_loss_scale(const LossScaleState& st) {
  if (scaler_) be_.copy_to_device(scaler_, &st, sizeof st);
}

ClipRecord Executor::read_clip_record() {
  ClipRecord r;
  if (clip_) be_.copy_to_host(&r, clip_, sizeof r);
  return r;
}

MetricSums Executor::read_metrics() {
  const size_t n = metric_floats();
  std::vector<float> host(n);
  be_.copy_to_host(host.data(), metrics_, n * sizeof(float));
  MetricSums m;
  m.loss_sum = host[0];
  m.samples = samples_;
  m.topk.assign(host.begin() + 1, host.begin() + 1 + long(o_.top_k.size()));
  m.confusion.assign(host.begin() + 1 + long(o_.top_k.size()), host.end());
  be_.copy_to_host(&m.nonfinite, nonfinite_, sizeof(NonfiniteRecord));
  check_collective();
  return m;
}

}  // namespace trainer
