#include "lib/train/session.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <future>

#include "datasets/batch_loader.h"
#include "datasets/split.h"
#include "lib/backend/device_spec.h"
#include "lib/core/elapsed.h"
#include "lib/core/error.h"
#include "lib/core/rng.h"
#include "lib/core/usable_cores.h"
#include "lib/data/data_sources.h"
#include "lib/keys/node_reader.h"
#include "lib/metrics/metrics.h"
#include "lib/train/data_parallel.h"

namespace trainer {

static void check_model_classes(const Model& model, int64_t C, const std::string& from, int64_t positions) {
  if (positions > 1) {
    if (C > 0 && model.output_shape() != Shape{positions, C})
      throw ConfigError("the model's output shape " + model.output_shape().batched_str() +
                        " does not match " + std::to_string(positions) +
                        " positions (the data's context) of " + from + " = " + std::to_string(C) +
                        " classes: a loss over every position takes (context, classes), e.g. a last layer "
                        "{type: dense, units: " +
                        std::to_string(C) + ", per_position: true}");
    return;
  }
  if (C > 0 && model.output_shape() != Shape{C})
    throw ConfigError("the model's output shape " + model.output_shape().batched_str() + " does not match " +
                      from + " = " + std::to_string(C) +
                      " (the last layer must produce one value per class)");
}

// A loss over every position (format text, tokens) runs on logits, without per-class weights or
// smoothing (what its kernels implement).
static void check_token_loss(const LossConfig& loss) {
  if (loss.positions <= 1) return;
  if (loss.scores != ClassScores::logits)
    throw ConfigError(
        "loss " + loss.type +
        (loss.scores == ClassScores::probabilities ? " on probabilities" : " on log-probabilities") +
        " over every position of a sequence is not implemented: use loss cross_entropy, and end "
        "the model with the logits (no softmax layer)");
  if (!loss.class_weights.empty())
    throw ConfigError(
        "loss.class_weights over every position of a sequence is not implemented: leave it out");
  if (loss.label_smoothing != 0.f)
    throw ConfigError(
        "loss.label_smoothing over every position of a sequence is not implemented: leave it out");
}

// The model's last layer against the loss: an activation the loss already applies (a softmax
// before a loss on logits, a sigmoid before binary_cross_entropy on logits) trains, but on a
// squashed signal; a softmax before a regression loss cannot fit targets outside [0, 1].
static void check_last_layer(const Model& m, const LossConfig& loss) {
  const Layer& last = *m.layers().back();
  const std::string layer = "the last layer '" + last.name() + "' (" + last.type() + ")";
  if (last.type() == "softmax" && !loss.on_values() && loss.scores == ClassScores::logits)
    spdlog::warn(
        "{} is followed by loss {}, which applies a softmax itself (from_logits: true): a double softmax. "
        "Remove the softmax layer, or set loss.from_logits: false (sparse_categorical_crossentropy)",
        layer, loss.type);
  if (last.type() == "sigmoid" && loss.on_values() && loss.formula == ValueLoss::bce_logits)
    spdlog::warn(
        "{} is followed by loss binary_cross_entropy, which takes logits and applies the sigmoid itself "
        "(as PyTorch's BCEWithLogitsLoss): a double sigmoid. Remove the sigmoid layer",
        layer);
  if ((last.type() == "softmax" || last.type() == "log_softmax") && loss.on_values())
    spdlog::warn("{} is followed by loss {}, which takes {}: end the model with the dense layer; {}", layer,
                 loss.type, loss.formula == ValueLoss::bce_logits ? "logits" : "unbounded values",
                 loss.formula == ValueLoss::bce_logits ? "for one class a sample, use loss cross_entropy"
                                                       : "for class labels, use loss cross_entropy");
}

std::unique_ptr<Model> make_model(const Config& cfg) {
  std::unique_ptr<Model> model;
  try {
    model = std::make_unique<Model>(cfg.input_shape, cfg.layers, cfg.init, cfg.file, cfg.blocks);
  } catch (const ConfigError& e) {  // a shape error: a channels-last input_shape is the likely cause
    const std::string hint = channels_first_hint(cfg.input_shape);
    if (hint.empty()) throw;
    throw ConfigError(std::string(e.what()) + "; " + hint);
  }
  const int64_t C = cfg.data.num_classes;
  const LossConfig& loss = cfg.loss_config;
  check_last_layer(*model, loss);
  if (loss.on_values()) {
    const Shape out = model->output_shape();
    // num_classes names a multi-label model's labels; a binary model (one output) may say 2.
    const bool multilabel_names =
        loss.formula == ValueLoss::bce_logits && C > 0 && !(out.rank() == 1 && out[0] == 1 && C <= 2);
    if (out.rank() != 1 || (multilabel_names && out[0] != C))
      throw ConfigError("the model's output shape " + out.batched_str() + " does not fit loss " + loss.type +
                        ", which takes one output per target value: " +
                        (multilabel_names
                             ? "data.num_classes = " + std::to_string(C) + " labels need a last layer of " +
                                   std::to_string(C) + " units"
                             : std::string("end the model with a dense layer of one unit per target")));
    if (loss.formula == ValueLoss::bce_logits && !loss.pos_weight.empty() && loss.pos_weight.size() != 1 &&
        int64_t(loss.pos_weight.size()) != out[0])
      throw ConfigError("loss.pos_weight has " + std::to_string(loss.pos_weight.size()) +
                        " values for the model's " + std::to_string(out[0]) +
                        " outputs: give one value, or one per output");
    model->check_batch_size(cfg.data.batch_size);
    if (!cfg.stages.empty()) stage_starts(*model, cfg.stages);
    return model;
  }
  check_token_loss(loss);
  check_model_classes(*model, C, "data.num_classes", loss.positions);
  model->check_batch_size(cfg.data.batch_size);               // before any loader sizes a batch
  if (!cfg.stages.empty()) stage_starts(*model, cfg.stages);  // the names and the boundaries
  return model;
}

// The math mode the kernels are planned with, and a note where it is not the one asked for: tf32
// on the CPU is a no-op (its kernels ignore it), bf16 on a CPU without bf16 instructions falls back
// to fp32, and a mode a GPU backend lacks is a config error.
static MathMode planned_math(const Backend& backend, MathMode asked) {
  const bool cpu = backend.name() == "cpu";
  if (cpu && asked == MathMode::tf32)
    spdlog::info(
        "--math tf32 (math: tf32) does nothing on the CPU: TF32 is a GPU tensor-core mode; the CPU "
        "computes in strict fp32");
  if (backend.supports_math(asked)) return asked;
  const bool fp16 = asked == MathMode::fp16;
  if (!cpu)
    throw ConfigError(
        std::string("math: ") + math_name(asked) + " needs " +
        (fp16 ? "fp16 tensor cores (compute capability 7.0" : "bf16 tensor cores (compute capability 8.0") +
        " or later), which " + backend.description() + " lacks; use math: tf32 or fp32");
  if (fp16)
    spdlog::info("math: fp16 is a GPU mode (the CPU kernels compute bf16 or fp32); computing in fp32 on {}",
                 backend.description());
  else
    spdlog::info(
        "math: {} needs AVX-512 BF16 or AMX instructions, which this CPU lacks ({}); computing in fp32",
        math_name(asked), backend.description());
  return MathMode::strict_fp32;
}

// train.loss_scale for the planned math: auto scales dynamically under fp16 only (fp16 that fell
// back to fp32 on the CPU has nothing to scale).
static void set_loss_scaling(ExecutorOptions& eo, const LossScaleConfig& ls, MathMode math) {
  using Mode = LossScaleConfig::Mode;
  const Mode mode = ls.mode != Mode::automatic ? ls.mode
                    : math == MathMode::fp16   ? Mode::dynamic
                                               : Mode::none;
  if (mode == Mode::none) {
    if (math == MathMode::fp16)
      spdlog::warn(
          "train.loss_scale: none under math fp16: gradients below 6e-8 become zero and larger ones lose "
          "bits; the default (auto) scales the loss dynamically");
    return;
  }
  eo.loss_scaling = true;
  eo.loss_scale_init = float(ls.init);
  eo.loss_scale.dynamic = mode == Mode::dynamic;
  eo.loss_scale.growth_interval = ls.growth_interval;
  if (eo.loss_scale.dynamic)
    spdlog::info("loss scaling: dynamic, from {:g}, halved on overflow, doubled after {} good steps", ls.init,
                 ls.growth_interval);
  else
    spdlog::info("loss scaling: fixed at {:g}; steps whose gradients overflow are skipped", ls.init);
}

// The GPU-only settings say so when they do nothing (the CPU backend is registered as "cpu").
static void note_gpu_only_settings(const Backend& backend, const DeviceRequest& d) {
  if (backend.name() != "cpu") return;
  if (d.mem_growth)
    spdlog::info(
        "--mem-growth (device.memory_growth) does nothing on the CPU: its memory is sized before the first "
        "step (--mem-limit still caps it)");
  if (d.deterministic)
    spdlog::info(
        "--deterministic (train.deterministic) does nothing on the CPU: it is deterministic already "
        "for one seed, build and thread count");
}

// data.normalize's mean and std lists as the loader takes them (scale left at 1).
static Normalization mean_and_std(const Config& cfg) {
  Normalization n;
  for (double m : cfg.data.normalize.mean) n.mean.push_back(float(m));
  for (double s : cfg.data.normalize.std) n.std.push_back(float(s));
  return n;
}

// data.augment for the executor: the image geometry, and the pad value of each channel, what a 0
// byte (or 0.0) becomes after the loader's normalization.
static AugmentSpec augment_spec(const Config& cfg) {
  AugmentSpec a;
  const AugmentConfig& c = cfg.data.augment;
  if (!c.active()) return a;
  a.channels = cfg.input_shape[0];
  a.height = cfg.input_shape[1];
  a.width = cfg.input_shape[2];
  a.crop_padding = int32_t(c.crop_padding);
  a.flip = c.flip;
  const std::vector<float> zero = normalized_zero(mean_and_std(cfg), cfg.input_shape);  // any scale: x = 0
  std::copy(zero.begin(), zero.end(), a.fill);
  return a;
}

// The device of each of `n` stages: cpu (every stage), one GPU (every stage on it), or a list
// of GPUs, one per stage. UsageError for a list of another length.
static std::vector<std::string> stage_device_list(const std::string& device, size_t n) {
  const std::optional<DeviceSpec> d = parse_device(device);
  if (!d || d->kind != DeviceSpec::Kind::gpu || !d->several()) return std::vector<std::string>(n, device);
  const BackendRegistry& backends = BackendRegistry::global();
  const std::vector<int> gpus = check_gpu_list(*d, backends.gpu_count());
  if (gpus.size() == 1) return std::vector<std::string>(n, "gpu:" + std::to_string(gpus[0]));
  if (gpus.size() != n)
    throw UsageError("--device " + device + " gives " + std::to_string(gpus.size()) + " GPUs for the " +
                     std::to_string(n) + " stages of model.stages: list one GPU per stage (stage k runs on " +
                     "the k-th), or one GPU for every stage");
  std::vector<std::string> out;
  for (int g : gpus) out.push_back("gpu:" + std::to_string(g));
  return out;
}

// The stages of model.stages, each a Model of its layers on its own backend (stage 1 takes the
// session's), and the pipeline over them; the memory each stage reserved goes to the log.
static std::unique_ptr<Pipeline> open_pipeline(const Config& cfg, const DeviceRequest& device,
                                               const std::vector<std::string>& devices, Session& s,
                                               const ExecutorOptions& eo) {
  std::vector<std::string> on = devices;
  // auto chose for stage 1: the CPU (the others follow without asking again), or a GPU (the
  // others choose the same first usable GPU).
  if (s.backend->name() == "cpu") std::fill(on.begin(), on.end(), "cpu");
  std::vector<size_t> starts = stage_starts(*s.model, cfg.stages);
  starts.insert(starts.begin(), 0);
  std::vector<PipelineStage> stages;
  for (size_t k = 0; k < starts.size(); ++k) {
    PipelineStage st;
    st.begin = starts[k];
    st.end = k + 1 < starts.size() ? starts[k + 1] : s.model->layers().size();
    st.model = std::make_unique<Model>(std::move(*make_model(cfg)), st.begin, st.end);
    st.device = on[k];
    if (k == 0) {
      st.backend = std::move(s.backend);
    } else {
      DeviceRequest dr = device;
      dr.device = on[k];
      std::string note;
      st.backend = BackendRegistry::global().create(dr, &note);
      if (!note.empty()) spdlog::warn("{}", note);
    }
    stages.push_back(std::move(st));
  }
  auto p = std::make_unique<Pipeline>(*s.model, std::move(stages), *s.optimizer, eo, int(cfg.micro_batches));
  spdlog::info("model parallel: {} stage(s) on {}, {} micro-batch(es) per batch (GPipe)", p->stage_count(),
               p->devices(), p->micro_batches());
  for (const std::string& line : p->memory_report()) spdlog::info("{}", line);
  return p;
}

std::string Session::device_description() const {
  if (!pipeline) return backend->description();
  std::string d;
  for (size_t k = 0; k < pipeline->stage_count(); ++k)
    d += (k ? "; " : "") + std::string("stage ") + std::to_string(k + 1) + ": " +
         pipeline->stage(k).backend->description();
  return d;
}

bool Session::trains_on_host() const {
  if (!pipeline) return backend->host_memory();
  for (size_t k = 0; k < pipeline->stage_count(); ++k)
    if (pipeline->stage(k).backend->host_memory()) return true;
  return false;
}

int loader_threads_for(const Config& cfg, const Session& s, const Dataset& d, bool cropped) {
  if (cfg.data.loader_threads > 0) return int(cfg.data.loader_threads);
  if (s.trains_on_host()) return 1;
  // Rows that cost a decode or a resize each (streamed images, random_resized_crop) get every core
  // but the one that runs the steps; a gather of stored rows is memory-bound at a few threads.
  return d.stream || cropped ? std::max(1, usable_cores() - 1) : default_loader_threads(usable_cores());
}

size_t Session::peak_bytes() const {
  return pipeline ? pipeline->peak_bytes() : backend->allocator().peak_bytes();
}

std::unique_ptr<Session> open_session(const Config& cfg, const DeviceRequest& device,
                                      std::vector<int64_t> batch_sizes, std::unique_ptr<Model> model,
                                      Communicator* comm, bool stages) {
  auto s = std::make_unique<Session>();
  s->model = model ? std::move(model) : make_model(cfg);
  // Classes the data would give (data.num_classes left out: bench's synthetic batches): the
  // model's outputs a position.
  s->classes = cfg.loss_config.on_values() ? s->model->output_shape().numel()
               : cfg.data.num_classes > 0  ? cfg.data.num_classes
                                           : s->model->output_shape().dims.back();
  const bool split = stages && (!cfg.stages.empty() || cfg.micro_batches > 1);
  if (split && comm && comm->size() > 1)
    throw UsageError(
        "model.stages / pipeline.micro_batches (model parallelism) cannot be combined with data parallelism "
        "(mpirun or several replicas) yet; train on one process, with --device gpu:0,1 giving each stage its "
        "GPU");
  if (split && cfg.sync_batchnorm && cfg.micro_batches > 1)
    throw UsageError(
        "device.sync_batchnorm: true asks batchnorm for the statistics of the whole batch, but "
        "pipeline.micro_batches: " +
        std::to_string(cfg.micro_batches) +
        " normalizes each micro-batch by its own (GPipe); synchronizing them is not implemented: set "
        "pipeline.micro_batches: 1 or device.sync_batchnorm: false");
  // The stages' devices, checked before any backend opens.
  const std::vector<std::string> stage_devices =
      split ? stage_device_list(device.device, cfg.stages.size() + 1) : std::vector<std::string>{};
  std::string note;
  DeviceRequest first = device;
  if (split) first.device = stage_devices[0];
  auto t = std::chrono::steady_clock::now();
  s->backend = BackendRegistry::global().create(first, &note);
  if (!note.empty()) spdlog::warn("{}", note);
  spdlog::debug("{}: opened in {:.0f} ms", s->backend->description(), ms_since(t));
  const MathMode math = planned_math(*s->backend, device.math);
  note_gpu_only_settings(*s->backend, device);
  s->optimizer = std::make_unique<Optimizer>(cfg.optimizer);
  ExecutorOptions eo;
  eo.math = math;
  // GPUs only: oneDNN's bf16 kernels are faster than its fp32 ones even on small layers.
  eo.low_precision_min_flops = s->backend->host_memory() ? 0.0 : cfg.low_precision_min_mflops * 1e6;
  std::sort(batch_sizes.begin(), batch_sizes.end());
  batch_sizes.erase(std::unique(batch_sizes.begin(), batch_sizes.end()), batch_sizes.end());
  eo.batch_sizes = batch_sizes;
  eo.num_classes = s->classes;
  eo.loss = cfg.loss_config;
  eo.top_k = topk_needed(cfg.metrics);
  eo.deterministic = device.deterministic;
  eo.seed = cfg.seed;
  eo.comm = comm;
  // One replica normalizes by the whole batch anyway: nothing to synchronize.
  eo.sync_batchnorm = cfg.sync_batchnorm && comm && comm->size() > 1;
  if (comm && comm->size() > 1 && !s->backend->host_memory()) {
    s->collective = join_device_collective(*comm, *s->backend);
    eo.collective = s->collective.get();
    // Any positive size caps the buckets (the smallest: one layer each); 0 leaves one bucket.
    eo.bucket_bytes = cfg.bucket_mb > 0 ? std::max<size_t>(1, size_t(cfg.bucket_mb * 1024 * 1024)) : 0;
    eo.gradient_compression = cfg.gradient_compression == "bf16"   ? DType::bf16
                              : cfg.gradient_compression == "fp16" ? DType::f16
                                                                   : DType::f32;
  } else if (comm && comm->size() > 1 && cfg.gradient_compression != "none" && comm->rank() == 0) {
    spdlog::warn(
        "device.gradient_compression: {} applies to GPU replicas (NCCL); CPU ranks all-reduce their "
        "gradients in fp32 (MPI)",
        cfg.gradient_compression);
  }
  // Rank r's shard would draw the same dropout masks and crops as rank 0's, row for row: mix the
  // rank in (rank 0 keeps the seed, so one rank is exactly the single-process run).
  if (comm && comm->rank() > 0) eo.seed = mix64(cfg.seed + uint64_t(comm->rank()) * 0x9E3779B97F4A7C15ull);
  eo.clip_grad_norm = float(cfg.clip_grad_norm);
  set_loss_scaling(eo, cfg.loss_scale, math);
  eo.augment = augment_spec(cfg);
  if (eo.augment.active())
    spdlog::info("augment: training batches {}{}{}, on the device at each step",
                 eo.augment.crop_padding ? "cropped at random after padding " +
                                               std::to_string(eo.augment.crop_padding) + " pixels"
                                         : "",
                 eo.augment.crop_padding && eo.augment.flip ? " and " : "",
                 eo.augment.flip ? "flipped left-right at random" : "");
  // The initial weights are drawn on the host while the plan is made (measuring the GPU's
  // algorithms mostly waits on the device and the driver): resnet18_cifar's 11M took ~50 ms of a
  // start, GPT-2 small's 124M several hundred. Model::initialize reads only the model, which the
  // plan does not change; the future's destructor waits for the draw if the plan throws.
  std::vector<float> params(size_t(s->model->param_arena_floats())),
      buffers(size_t(std::max<int64_t>(s->model->buffer_arena_floats(), 1)));
  std::future<double> drawn = std::async(std::launch::async, [&] {
    const auto t_draw = std::chrono::steady_clock::now();
    s->model->initialize(params.data(), buffers.data(), cfg.seed);
    return ms_since(t_draw);
  });
  t = std::chrono::steady_clock::now();
  if (split)
    s->pipeline = open_pipeline(cfg, device, stage_devices, *s, eo);
  else
    s->executor = std::make_unique<Executor>(*s->model, *s->backend, *s->optimizer, eo);
  const double plan_ms = ms_since(t);
  t = std::chrono::steady_clock::now();
  const double draw_ms = drawn.get();
  const double waited_ms = ms_since(t);
  t = std::chrono::steady_clock::now();
  s->runner().upload_params(params.data(), buffers.data());
  spdlog::debug(
      "plan made in {:.0f} ms; initial weights drawn in {:.0f} ms beside it ({:.0f} ms waited for), "
      "uploaded in {:.0f} ms",
      plan_ms, draw_ms, waited_ms, ms_since(t));
  return s;
}

TargetLayout target_layout(const Config& cfg) {
  const LossConfig& l = cfg.loss_config;
  if (!l.on_values()) return {TargetKind::class_index, l.positions};
  const Model m(cfg.input_shape, cfg.layers, cfg.init, cfg.file, cfg.blocks);
  return {TargetKind::values, m.output_shape().numel(), l.formula == ValueLoss::bce_logits};
}

RunData load_run_data(const Config& cfg, bool need_train) {
  RunData d;
  SourceContext ctx;
  ctx.num_classes = int(cfg.data.num_classes);
  ctx.input_shape = cfg.input_shape;
  ctx.class_names = cfg.data.class_names;
  ctx.learned_from = cfg.data.train;
  ctx.target = target_layout(cfg);
  const bool values = cfg.loss_config.on_values();
  const bool has_source = present(cfg.data.validation);
  const bool split = !has_source && cfg.data.validation_split > 0;
  const YAML::Node& train = cfg.data.train;
  const bool unrecorded =
      train["format"] && train["format"].IsScalar() && train["format"].Scalar() == "csv" && !train["columns"];
  // Standardized targets need the training rows' statistics, unless a run recorded them.
  const TargetScale recorded = recorded_target_scale(cfg);
  const bool learn_scale = normalize_targets(cfg) && !recorded.on();
  if (need_train || split || (cfg.data.num_classes == 0 && !values) || unrecorded || learn_scale) {
    SplitOptions split_options;
    split_options.fraction = cfg.data.validation_split;
    split_options.shuffle = cfg.data.split_shuffle;
    split_options.stratify = cfg.data.split_stratify;
    split_options.seed = cfg.seed;
    if (split) ctx.split = split_options;
    const bool rrc = cfg.data.augment.random_resized_crop;
    ctx.any_image_size = rrc;
    d.train = load_source(train, "data.train", cfg.file, ctx, &d.learned);
    ctx.any_image_size = false;
    if (rrc && d.train.sample_shape != cfg.input_shape && split)
      throw DataError(
          "data.train: its images are " + d.train.sample_shape.str() + " for random_resized_crop to " +
          cfg.input_shape.str() +
          ", so data.validation_split would validate on images of the wrong size: give data.validation "
          "images of model.input_shape's size (e.g. resize: {shorter: S} and center_crop)");
    d.has_train = true;
    ctx.split.reset();
    // The validation data is read with what the training data taught.
    if (d.learned.size() > 0) {
      ctx.learned_from = YAML::Clone(train);
      for (const auto& kv : d.learned) ctx.learned_from[kv.first.Scalar()] = kv.second;
    }
    if (ctx.class_names.empty()) ctx.class_names = d.train.class_names;
    if (ctx.num_classes == 0 && !values) ctx.num_classes = d.train.num_classes;
    if (split) {
      SplitResult parts = split_validation(d.train, split_options);
      if (!parts.note.empty()) spdlog::info("data.split: {}", parts.note);
      d.train = std::move(parts.train);
      d.val = std::move(parts.validation);
      d.has_val = true;
    }
  }
  if (has_source) {
    d.val = load_source(cfg.data.validation, "data.validation", cfg.file, ctx);
    d.has_val = true;
  }
  d.class_names = ctx.class_names;
  d.num_classes = ctx.num_classes;
  if (normalize_targets(cfg)) {
    d.target_scale = learn_scale ? target_statistics(d.train) : recorded;
    if (d.has_train) standardize_targets(d.train, d.target_scale, "data.train");
    if (d.has_val) standardize_targets(d.val, d.target_scale, split ? "data.train" : "data.validation");
  }
  // Classes that one side lacks: a validation accuracy that cannot mean what it seems to.
  if (d.has_train && d.has_val) {
    const std::string w = class_coverage_warning(d.train, d.val, d.class_names);
    if (!w.empty()) spdlog::warn("{}: {}", split ? "data.split" : "data.validation", w);
  }
  return d;
}

Config with_data_classes(const Config& cfg, const RunData& data, const Model& model) {
  Config c = cfg;
  if (c.data.num_classes > 0) return c;
  c.data.num_classes = data.num_classes;
  c.data.class_names = data.class_names;
  check_model_classes(model, c.data.num_classes, "the number of classes in data.train",
                      c.loss_config.positions);
  return c;
}

void add_batch_sizes(std::vector<int64_t>& sizes, int64_t n, int64_t batch, bool drop_last) {
  sizes.push_back(std::min(batch, n));
  if (!drop_last && n > batch && n % batch) sizes.push_back(n % batch);
}

Normalization normalization_for(const Config& cfg, const Dataset& d) {
  Normalization n = mean_and_std(cfg);
  n.scale = float(cfg.data.scale_known ? cfg.data.normalize.scale
                                       : (d.dtype == SampleDtype::u8 ? 1.0 / 255.0 : 1.0));
  return n;
}

MetricSums evaluate_pass(StepRunner& ex, BatchLoader& loader, const std::function<bool()>& stop,
                         bool* complete) {
  ex.reset_metrics();
  loader.start_epoch(0);
  const float* x;
  const void* y;
  int64_t rows;
  if (complete) *complete = true;
  while (loader.next(&x, &y, &rows)) {
    ex.eval_step(rows, x, y);
    if (stop && stop()) {
      if (complete) *complete = false;
      break;
    }
  }
  return ex.read_metrics();
}

}  // namespace trainer
