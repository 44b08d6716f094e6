// Config: the YAML file plus --set overrides, validated into typed sections.
//
// Precedence: built-in defaults < config file < --set < dedicated CLI flags (which cmd/ turns
// into --set overrides). Every key is validated before anything runs; see docs/config-guide.md.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "lib/backend/backend.h"
#include "lib/core/shape.h"
#include "lib/losses/losses.h"
#include "lib/model/model.h"
#include "lib/optim/optimizer.h"

namespace trainer {

struct MetricSpec {
  std::string type;  // accuracy | top_k_accuracy | precision | recall | f1
  int64_t k = 1;
  std::string label() const;  // "accuracy", "top5_accuracy", "f1"
};

struct NormalizeConfig {
  double scale = 1.0;  // applied first: x * scale
  std::vector<double> mean{0.0}, std{1.0};
};

// data.augment: {crop_padding: P, flip: none|horizontal} (lib/core/augment_formula.h)
struct AugmentConfig {
  // random_resized_crop: true | {scale: [lo, hi], ratio: [lo, hi]}: torchvision's RandomResizedCrop
  // of each training image to model.input_shape's height and width, on the host as batches are
  // filled (datasets/batch_loader.h); the training images may then be of any size.
  bool random_resized_crop = false;
  double rrc_scale[2] = {0.08, 1.0}, rrc_ratio[2] = {3.0 / 4.0, 4.0 / 3.0};
  int64_t crop_padding = 0;
  bool flip = false;
  bool active() const { return crop_padding > 0 || flip; }
};

struct DataConfig {
  YAML::Node train, validation;  // source sections, read by lib/data/data_sources.cc
  int64_t num_classes = 0;
  int64_t batch_size = 32;
  bool shuffle = true;
  bool drop_last = false;
  int64_t loader_threads = 0;  // threads that fill a large batch; 0: loader_threads_for()
  // data.split: {fraction, shuffle, stratify} (datasets/split.h); data.validation_split: f is the
  // short form of split: {fraction: f}. validation_split holds the fraction (0: no split).
  double validation_split = 0;
  bool split_shuffle = true;
  bool split_stratify = true;  // default: split_shuffle
  NormalizeConfig normalize;
  AugmentConfig augment;
  bool scale_given = false;  // data.normalize.scale was given
  // normalize.scale holds the scale for every source: given, or the default for data.train's
  // samples (1/255 for uint8, 1 otherwise; lib/data/data_sources.h default_scale). False only
  // when data.train's dtype cannot be told before reading it (then each source's own dtype decides).
  bool scale_known = false;
  std::vector<std::string> class_names;  // data.class_names (lib/config/class_names.h); empty: ids
};

// checkpoint: {every: N, keep_last: K, best: METRIC}  (lib/train/checkpointing.h)
struct CheckpointConfig {
  int64_t every = 1;          // a resumable checkpoint every N epochs (0: only the last epoch)
  int64_t keep_last = 3;      // resumable checkpoints kept (0: all)
  std::string best = "auto";  // monitor for best.safetensors; "none": off (see Monitor)
};

// How a monitored quantity ("val_loss", "accuracy", ...) improves.
enum class MonitorMode { min, max };

// schedule: {type: constant|step|exponential|cosine|reduce_on_plateau, ...}  (lib/train/schedules.h)
struct ScheduleConfig {
  std::string type = "constant";
  int64_t warmup_steps = 0;   // linear warmup over the first N updates (any type)
  int64_t warmup_epochs = 0;  // the same in epochs (converted with the steps per epoch)
  int64_t step_size = 1;      // step: decay every N epochs
  double gamma = 0.1;         // step, exponential: factor per decay
  double min_lr = 0;          // cosine, reduce_on_plateau: the floor
  // reduce_on_plateau
  std::string monitor;  // resolved: never "auto"
  MonitorMode mode = MonitorMode::min;
  double factor = 0.1;
  int64_t patience = 10;
  double min_delta = 1e-4;
  int64_t cooldown = 0;
};

// early_stopping: {monitor, patience, min_delta, restore_best, mode}  (present: enabled)
struct EarlyStoppingConfig {
  bool enabled = false;
  std::string monitor;  // resolved: never "auto"
  MonitorMode mode = MonitorMode::min;
  int64_t patience = 5;
  double min_delta = 0;
  bool restore_best = true;
};

// train.loss_scale (lib/backend/step_kernels.h, LossScaleState).
struct LossScaleConfig {
  enum class Mode { automatic, none, fixed, dynamic };
  Mode mode = Mode::automatic;  // auto: dynamic under math fp16, none otherwise
  double init = 65536;          // the starting scale (dynamic), or the scale (fixed)
  int64_t growth_interval = 2000;
};

struct Config {
  std::string file;
  YAML::Node root;      // the document after --set
  YAML::Node resolved;  // every key with defaults filled (model layers added by describe())

  Shape input_shape;
  InitScheme init = InitScheme::torch;
  YAML::Node layers;
  YAML::Node blocks;  // model.blocks: named blocks used like layer types (lib/model/layer_list.h)
  // Model parallelism (lib/model/pipeline.h): model.stages, the names of the layers where stage
  // 2, 3, ... begin (empty: one stage), and pipeline.micro_batches (GPipe's M).
  std::vector<std::string> stages;
  int64_t micro_batches = 1;
  LossConfig loss_config;  // loss: the validated section (lib/losses)
  OptimizerConfig optimizer;
  std::vector<MetricSpec> metrics;
  DataConfig data;
  int64_t epochs = 10;
  uint64_t seed = 0;
  std::string device = "cpu";    // cpu | auto | gpu:N (device.type and device.id)
  int64_t memory_limit_mib = 0;  // device.memory_limit: 0 = no cap
  bool memory_growth = false;    // device.memory_growth
  double bucket_mb = 25;         // device.bucket_mb: MiB per gradient all-reduce bucket (0: one)
  // device.gradient_compression: none | bf16 | fp16, the dtype GPU replicas all-reduce gradients in.
  std::string gradient_compression = "none";
  // device.sync_batchnorm: with several replicas, batchnorm normalizes by the global batch's
  // statistics (lib/core/batchnorm_sync_formula.h); one replica: nothing changes.
  bool sync_batchnorm = false;
  MathMode math = MathMode::strict_fp32;
  // low_precision_min_mflops: under math bf16/fp16, convolutions and dense layers whose forward
  // does fewer MFLOP a step (at the largest batch) stay f32 (ExecutorOptions).
  double low_precision_min_mflops = 256;
  bool deterministic = false;
  int threads = 0;              // CPU threads; 0: the cores this process may use (OMP_NUM_THREADS if set)
  bool on_nan_skip = false;     // train.on_nan: stop (false) | skip (true)
  bool divergence_stop = true;  // train.divergence: stop (true) | warn (false); lib/train/divergence.h
  LossScaleConfig loss_scale;   // train.loss_scale, train.loss_scale_init, train.loss_scale_growth_interval
  CheckpointConfig checkpoint;
  ScheduleConfig schedule;
  EarlyStoppingConfig early_stopping;
  double clip_grad_norm = 0;  // 0: off; else the max global L2 norm of the gradients
  // The monitor names valid for this config: loss and every metric label, each also with
  // "val_" when there is validation data ("val_accuracy", "top5_accuracy", ...).
  std::vector<std::string> monitors() const;
  bool has_validation() const;
};

// "min" for names ending in "loss", else "max".
MonitorMode default_mode(const std::string& monitor);

// Applies "a.b.3.c=value" to a document: maps by key, lists by index. The value is YAML
// ("64", "[1, 28, 28]", "{type: sgd}"). Throws ConfigError naming the override.
void apply_override(YAML::Node& root, const std::string& assignment);

// Loads, overrides and validates. Throws ConfigError with file:line:column on any problem.
Config load_config(const std::string& path, const std::vector<std::string>& overrides);
// The same from a string (tests).
Config parse_config(const std::string& yaml_text, const std::string& name,
                    const std::vector<std::string>& overrides);

}  // namespace trainer
