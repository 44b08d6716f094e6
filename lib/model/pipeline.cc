#include "lib/model/pipeline.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "lib/core/error.h"
#include "lib/core/shard.h"
#include "lib/keys/node_reader.h"
#include "lib/memory/allocator.h"

namespace trainer {

std::vector<size_t> stage_starts(const Model& whole, const std::vector<std::string>& names) {
  const auto& layers = whole.layers();
  std::map<std::string, size_t> index;
  std::vector<std::string> all;
  for (size_t i = 0; i < layers.size(); ++i) {
    index[layers[i]->name()] = i;
    all.push_back(layers[i]->name());
  }
  std::vector<size_t> starts;
  for (const std::string& name : names) {
    auto it = index.find(name);
    if (it == index.end()) {
      const std::string close = closest_match(name, all);
      std::string listed;
      for (const auto& n : all) listed += (listed.empty() ? "" : ", ") + n;
      throw ConfigError(
          "model.stages: no layer is named '" + name + "'" +
          (close.empty() ? "" : " (did you mean '" + close + "'?)") +
          "; give the names of the layers where stage 2, 3, ... begin; the layers, in order: " + listed);
    }
    if (it->second == 0)
      throw ConfigError(
          "model.stages: '" + name +
          "' is the first layer, where stage 1 begins anyway; name the first layer of stage 2, 3, ...");
    if (!starts.empty() && it->second <= starts.back())
      throw ConfigError(
          "model.stages: '" + name + "' comes " +
          (it->second == starts.back() ? "twice" : "before '" + layers[starts.back()]->name() + "'") +
          "; name each stage's first layer once, in the order the layers run");
    starts.push_back(it->second);
  }
  // Only the output of the layer before a stage crosses into it: a skip connection across a
  // boundary is refused here, naming both layers (Model's stage constructor checks it again).
  for (size_t k = 0; k < starts.size(); ++k) {
    const size_t begin = starts[k], end = k + 1 < starts.size() ? starts[k + 1] : layers.size();
    for (size_t i = begin; i < end; ++i)
      for (int f : whole.layer_inputs(i))
        if (f < int(begin) - 1)
          throw ConfigError(
              "model.stages: layer '" + layers[i]->name() + "' (stage " + std::to_string(k + 2) +
              ") takes the output of " +
              (f < 0 ? std::string("the model's input") : "'" + layers[size_t(f)]->name() + "'") +
              " from an earlier stage; only the output of the layer just before a stage ('" +
              layers[begin - 1]->name() + "') crosses into it: move the boundary '" + layers[begin]->name() +
              "' so that the connection stays inside one stage");
  }
  return starts;
}

Pipeline::Pipeline(const Model& whole, std::vector<PipelineStage> stages, const Optimizer& optimizer,
                   const ExecutorOptions& options, int micro_batches)
    : whole_(whole), stages_(std::move(stages)), micro_(std::max(micro_batches, 1)) {
  const size_t S = stages_.size();
  if (S == 0) throw InternalError("a pipeline without stages");
  if (options.comm && options.comm->size() > 1)
    throw UsageError("model.stages (model parallelism) cannot be combined with data parallelism yet");
  if (S > 1 && options.loss_scaling)
    throw ConfigError(
        "loss scaling (train.loss_scale, on by default under math: fp16) with model.stages is not "
        "implemented yet: the scale and its overflow verdict would have to span the stages; use "
        "math: bf16, or train.loss_scale: none");
  state_slots_ = optimizer.state_slots();
  clip_stages_ = S > 1 && options.clip_grad_norm > 0;
  // Every micro-batch size of every batch size; one activation slot per micro-batch in flight.
  std::vector<int64_t> sizes;
  for (int64_t b : options.batch_sizes) {
    splits_[b] = split(b);
    for (const auto& mb : splits_[b].parts) sizes.push_back(mb.second);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  // The stages' tensors in the whole model's arenas: the same names.
  std::map<std::string, const TensorSlot*> by_name;
  for (const TensorSlot& t : whole.params()) by_name[t.name] = &t;
  for (const TensorSlot& t : whole.buffers()) by_name["buffer " + t.name] = &t;
  for (size_t k = 0; k < S; ++k) {
    PipelineStage& st = stages_[k];
    ExecutorOptions eo = options;
    eo.batch_sizes = sizes;
    eo.activation_slots = micro_;
    eo.input_gradient = k > 0;
    eo.output_gradient_given = k + 1 < S;
    eo.first_layer = int(st.begin);
    if (S > 1 && eo.clip_grad_norm > 0) eo.clip_stages = int(S);  // the norm of every stage's gradients
    if (k > 0) eo.augment = AugmentSpec();  // the input batch is augmented once, in stage 1
    if (k + 1 < S) eo.loss_scaling = false;
    st.backend->make_current();
    executors_.push_back(std::make_unique<Executor>(*st.model, *st.backend, optimizer, eo));
    auto slices = [&](const std::vector<TensorSlot>& mine, const char* prefix) {
      std::vector<Slice> out;
      for (const TensorSlot& t : mine) {
        auto it = by_name.find(prefix + t.name);
        if (it == by_name.end() || it->second->shape != t.shape)
          throw InternalError("stage tensor '" + t.name + "' is not the whole model's");
        out.push_back({it->second->offset, t.offset, t.shape.numel()});
      }
      return out;
    };
    params_.push_back(slices(st.model->params(), ""));
    buffers_.push_back(slices(st.model->buffers(), "buffer "));
  }
}

// Each stage's executor, then its backend, with its device current (library handles are
// destroyed on theirs). A destructor: a failing make_current is passed over.
Pipeline::~Pipeline() {
  const auto current = [](Backend& b) {
    try {
      b.make_current();
    } catch (...) {
    }
  };
  for (size_t k = executors_.size(); k-- > 0;) {
    current(*stages_[k].backend);
    executors_[k].reset();
  }
  for (size_t k = stages_.size(); k-- > 0;) {
    current(*stages_[k].backend);
    stages_[k].backend.reset();
  }
}

Pipeline::Split Pipeline::split(int64_t rows) const {
  const int m = int(std::min<int64_t>(micro_, std::max<int64_t>(rows, 1)));
  Split out;
  for (int k = 0; k < m; ++k) {
    const Shard s = shard_of(rows, k, m);
    out.parts.emplace_back(s.begin, s.rows);
    out.weights.push_back(rows > 0 ? float(double(s.rows) / double(rows)) : 0.f);
  }
  return out;
}

const Pipeline::Split& Pipeline::split_of(int64_t rows) const {
  const auto it = splits_.find(rows);
  if (it == splits_.end())
    throw InternalError("pipeline: batch size " + std::to_string(rows) + " was not planned");
  return it->second;
}

void Pipeline::to_stage(const std::vector<Slice>& slices, const float* whole, float* stage) {
  for (const Slice& s : slices) std::copy(whole + s.whole, whole + s.whole + s.n, stage + s.stage);
}

void Pipeline::to_whole(const std::vector<Slice>& slices, const float* stage, float* whole) {
  for (const Slice& s : slices) std::copy(stage + s.stage, stage + s.stage + s.n, whole + s.whole);
}

// Host arenas of the whole model <-> each stage's arenas, tensor by tensor.
void Pipeline::upload_params(const float* params, const float* buffers) {
  for (size_t k = 0; k < stages_.size(); ++k) {
    const Model& m = *stages_[k].model;
    std::vector<float> p(size_t(m.param_arena_floats()), 0.f),
        b(size_t(std::max<int64_t>(m.buffer_arena_floats(), 1)), 0.f);
    to_stage(params_[k], params, p.data());
    if (buffers) to_stage(buffers_[k], buffers, b.data());
    stages_[k].backend->make_current();
    executors_[k]->upload_params(p.data(), b.data());
  }
}

void Pipeline::download_params(float* params, float* buffers) {
  std::fill(params, params + whole_.param_arena_floats(), 0.f);
  for (size_t k = 0; k < stages_.size(); ++k) {
    const Model& m = *stages_[k].model;
    std::vector<float> p(size_t(m.param_arena_floats())),
        b(size_t(std::max<int64_t>(m.buffer_arena_floats(), 1)));
    stages_[k].backend->make_current();
    executors_[k]->download_params(p.data(), buffers ? b.data() : nullptr);
    to_whole(params_[k], p.data(), params);
    if (buffers) to_whole(buffers_[k], b.data(), buffers);
  }
}

void Pipeline::upload_buffers(const float* buffers) {
  for (size_t k = 0; k < stages_.size(); ++k) {
    std::vector<float> b(size_t(std::max<int64_t>(stages_[k].model->buffer_arena_floats(), 1)), 0.f);
    to_stage(buffers_[k], buffers, b.data());
    stages_[k].backend->make_current();
    executors_[k]->upload_buffers(b.data());
  }
}

void Pipeline::download_buffers(float* buffers) {
  for (size_t k = 0; k < stages_.size(); ++k) {
    std::vector<float> b(size_t(std::max<int64_t>(stages_[k].model->buffer_arena_floats(), 1)));
    stages_[k].backend->make_current();
    executors_[k]->download_buffers(b.data());
    to_whole(buffers_[k], b.data(), buffers);
  }
}

int64_t Pipeline::optimizer_state_floats() const {
  return int64_t(state_slots_) * whole_.param_arena_floats();
}

// Each state slot is laid out like the parameters, in the whole model's host copy as in a stage.
void Pipeline::upload_optimizer_state(const float* state) {
  const int64_t W = whole_.param_arena_floats();
  for (size_t k = 0; k < stages_.size(); ++k) {
    const int64_t n = stages_[k].model->param_arena_floats();
    std::vector<float> mine(size_t(state_slots_ * n), 0.f);
    for (int slot = 0; slot < state_slots_; ++slot)
      to_stage(params_[k], state + slot * W, mine.data() + slot * n);
    stages_[k].backend->make_current();
    if (!mine.empty()) executors_[k]->upload_optimizer_state(mine.data());
  }
}

void Pipeline::download_optimizer_state(float* state) {
  const int64_t W = whole_.param_arena_floats();
  std::fill(state, state + state_slots_ * W, 0.f);
  for (size_t k = 0; k < stages_.size(); ++k) {
    const int64_t n = stages_[k].model->param_arena_floats();
    std::vector<float> mine(size_t(state_slots_ * n));
    stages_[k].backend->make_current();
    if (!mine.empty()) executors_[k]->download_optimizer_state(mine.data());
    for (int slot = 0; slot < state_slots_; ++slot)
      to_whole(params_[k], mine.data() + slot * n, state + slot * W);
  }
}

void Pipeline::hand_forward(size_t k, int64_t rows, int slot) {
  Backend &from = *stages_[k - 1].backend, &to = *stages_[k].backend;
  const float* src = executors_[k - 1]->stage_tensors(rows, slot).output;
  float* dst = executors_[k]->stage_tensors(rows, slot).input;
  to.make_current();
  to.wait_for(from);
  to.copy_from(from, dst, src, size_t(rows * stages_[k].model->input_shape().numel()) * sizeof(float));
}

void Pipeline::hand_backward(size_t k, int64_t rows, int slot) {
  Backend &from = *stages_[k + 1].backend, &to = *stages_[k].backend;
  const float* src = executors_[k + 1]->stage_tensors(rows, slot).input_grad;
  float* dst = executors_[k]->stage_tensors(rows, slot).output_grad;
  to.make_current();
  to.wait_for(from);
  to.copy_from(from, dst, src, size_t(rows * stages_[k].model->output_shape().numel()) * sizeof(float));
}

// The targets of rows [first, ...) of a batch's targets y, as the loss stage takes them.
const void* Pipeline::target_rows(const void* y, int64_t first) const {
  return static_cast<const char*>(y) + size_t(first) * executors_.back()->target_row_bytes();
}

void Pipeline::train_step(int64_t batch, const float* x, const void* y, int64_t t, float lr, int64_t) {
  const size_t S = stages_.size(), last = S - 1;
  const Split& sp = split_of(batch);
  const auto& mbs = sp.parts;
  const auto& weights = sp.weights;
  const int count = int(mbs.size());
  const int64_t in = whole_.input_shape().numel();
  // Every stage's scalars follow stage 1's (Nadam's product is carried on the host). The loss
  // stage's scalars are rewritten only after the other stages have read the last step's flags.
  const StepScalars carried = executors_[0]->host_scalars();
  for (size_t k = 0; k < S; ++k) {
    stages_[k].backend->make_current();
    if (k == last)
      for (size_t j = 0; j < last; ++j) stages_[k].backend->wait_for(*stages_[j].backend);
    executors_[k]->host_scalars() = carried;
    executors_[k]->stage_begin_step(t, lr, weights);
  }
  for (int m = 0; m < count; ++m) {
    const auto [first, rows] = mbs[size_t(m)];
    for (size_t k = 0; k < S; ++k) {
      if (k > 0) hand_forward(k, rows, m);
      stages_[k].backend->make_current();
      executors_[k]->stage_upload(rows, m, k == 0 ? x + first * in : nullptr,
                                  k == last ? target_rows(y, first) : nullptr, true);
      executors_[k]->stage_forward(rows, m, true);
    }
  }
  for (int m = count; m-- > 0;) {
    const int64_t rows = mbs[size_t(m)].second;
    for (size_t k = S; k-- > 0;) {
      if (k < last) hand_backward(k, rows, m);
      stages_[k].backend->make_current();
      executors_[k]->stage_backward(rows, m, count - 1 - m, count);
    }
  }
  if (clip_stages_) clip_over_stages();
  // The loss stage updates first; the others take its non-finite flags (the loss's verdict and
  // its gradients'), so a step it skips is skipped everywhere.
  stages_[last].backend->make_current();
  executors_[last]->stage_update(batch);
  for (size_t k = last; k-- > 0;) {
    Backend &from = *stages_[last].backend, &to = *stages_[k].backend;
    to.make_current();
    to.wait_for(from);
    to.copy_from(from, executors_[k]->stage_nonfinite_flags(), executors_[last]->stage_nonfinite_flags(),
                 sizeof(uint32_t));
    executors_[k]->stage_update(batch);
  }
}

// clip_grad_norm over the stages: each stage's partial sums of squares, every stage's copied
// into every other's buffer (group k from stage k), then each scales its gradients by the norm
// of them all, the same factor everywhere.
void Pipeline::clip_over_stages() {
  const size_t S = stages_.size();
  for (size_t k = 0; k < S; ++k) {
    stages_[k].backend->make_current();
    executors_[k]->stage_clip_partials(int(k));
  }
  const size_t group = size_t(kClipPartials) * sizeof(double);
  for (size_t k = 0; k < S; ++k) {
    Backend& to = *stages_[k].backend;
    to.make_current();
    for (size_t j = 0; j < S; ++j) {
      if (j == k) continue;
      Backend& from = *stages_[j].backend;
      to.wait_for(from);
      to.copy_from(from, executors_[k]->stage_clip_partials_buffer() + j * kClipPartials,
                   executors_[j]->stage_clip_partials_buffer() + j * kClipPartials, group);
    }
    executors_[k]->stage_clip();
  }
}

void Pipeline::forward_all(int64_t batch, const float* x, const void* y, bool training, bool with_loss,
                           float* out) {
  const size_t S = stages_.size(), last = S - 1;
  const int64_t in = whole_.input_shape().numel(), outn = whole_.output_shape().numel();
  const auto& mbs = split_of(batch).parts;
  for (int m = 0; m < int(mbs.size()); ++m) {
    const auto [first, rows] = mbs[size_t(m)];
    for (size_t k = 0; k < S; ++k) {
      if (k > 0) hand_forward(k, rows, m);
      stages_[k].backend->make_current();
      executors_[k]->stage_upload(rows, m, k == 0 ? x + first * in : nullptr,
                                  k == last && y ? target_rows(y, first) : nullptr, training);
      executors_[k]->stage_forward(rows, m, training, with_loss);
    }
  }
  if (!out) return;
  stages_[last].backend->make_current();
  for (int m = 0; m < int(mbs.size()); ++m) {
    const auto [first, rows] = mbs[size_t(m)];
    stages_[last].backend->copy_to_host(out + first * outn, executors_[last]->stage_tensors(rows, m).output,
                                        size_t(rows * outn) * sizeof(float));
  }
}

void Pipeline::eval_step(int64_t batch, const float* x, const void* y) {
  if (batch > 0) forward_all(batch, x, y, false, true, nullptr);
}

void Pipeline::predict(int64_t batch, const float* x, float* out) {
  forward_all(batch, x, nullptr, false, false, out);
}

void Pipeline::reset_metrics() {
  for (size_t k = 0; k < stages_.size(); ++k) {
    stages_[k].backend->make_current();
    executors_[k]->reset_metrics();
  }
}

// The loss and the metrics are the last stage's; a non-finite record of any stage counts.
MetricSums Pipeline::read_metrics() {
  stages_.back().backend->make_current();
  MetricSums m = executors_.back()->read_metrics();
  for (size_t k = 0; k + 1 < stages_.size(); ++k) {
    stages_[k].backend->make_current();
    const NonfiniteRecord r = executors_[k]->read_metrics().nonfinite;
    NonfiniteRecord& a = m.nonfinite;
    if (r.steps > a.steps) {
      a.steps = r.steps;
      a.samples = r.samples;
    }
    if (r.first_step && (!a.first_step || r.first_step < a.first_step)) {
      a.first_step = r.first_step;
      a.first_what = r.first_what;
    }
    a.what |= r.what;
  }
  return m;
}

void Pipeline::restore_metrics(const MetricSums& m) {
  for (size_t k = 0; k < stages_.size(); ++k) {
    MetricSums mine;
    if (k + 1 == stages_.size()) mine = m;
    mine.nonfinite = m.nonfinite;
    stages_[k].backend->make_current();
    executors_[k]->restore_metrics(mine);
  }
}

size_t Pipeline::planned_bytes() const {
  size_t n = 0;
  for (const auto& ex : executors_) n += ex->planned_bytes();
  return n;
}

// Clipping's record and the loss scale: the loss stage's (every stage's record is the same).
ClipRecord Pipeline::read_clip_record() {
  stages_.back().backend->make_current();
  return executors_.back()->read_clip_record();
}

bool Pipeline::loss_scaling() const { return executors_.back()->loss_scaling(); }

LossScaleState Pipeline::read_loss_scale() {
  stages_.back().backend->make_current();
  return executors_.back()->read_loss_scale();
}

void Pipeline::restore_loss_scale(const LossScaleState& st) {
  stages_.back().backend->make_current();
  executors_.back()->restore_loss_scale(st);
}
StepScalars& Pipeline::host_scalars() { return executors_[0]->host_scalars(); }

std::vector<std::string> Pipeline::memory_report() const {
  std::vector<std::string> lines;
  const auto mib = [](size_t b) { return double(b) / double(1 << 20); };
  // Stages sharing a device (all on the CPU, or on one GPU): that device's total too.
  std::map<std::string, std::pair<size_t, int>> on_device;  // bytes, stages
  for (const auto& st : stages_) {
    on_device[st.device].first += st.backend->allocator().bytes_in_use();
    on_device[st.device].second += 1;
  }
  for (size_t k = 0; k < stages_.size(); ++k) {
    const PipelineStage& st = stages_[k];
    const auto& layers = st.model->layers();
    const std::string span =
        layers.size() == 1 ? layers.front()->name() : layers.front()->name() + " .. " + layers.back()->name();
    const auto& shared = on_device.at(st.device);
    char total[128] = "";
    if (shared.second > 1)
      std::snprintf(total, sizeof total, " (%s: %.2f MiB for its %d stages)", st.device.c_str(),
                    mib(shared.first), shared.second);
    char line[640];
    std::snprintf(
        line, sizeof line,
        "stage %zu/%zu: layers %zu-%zu (%s), %zu layers, %lld parameters, on %s: parameters %.2f MiB "
        "(with gradients and optimizer state), activations %.2f MiB, %.2f MiB reserved on the device%s",
        k + 1, stages_.size(), st.begin + 1, st.end, span.c_str(), layers.size(),
        (long long)st.model->num_params(), st.device.c_str(), mib(executors_[k]->parameter_bytes()),
        mib(executors_[k]->activation_bytes()), mib(st.backend->allocator().bytes_in_use()), total);
    lines.push_back(line);
  }
  return lines;
}

std::string Pipeline::devices() const {
  std::string s;
  for (const auto& st : stages_) s += (s.empty() ? "" : ", ") + st.device;
  return s;
}

size_t Pipeline::peak_bytes() const {
  size_t n = 0;
  for (const auto& st : stages_) n += st.backend->allocator().peak_bytes();
  return n;
}

}  // namespace trainer
