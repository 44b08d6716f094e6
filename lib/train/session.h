// Session: what fit, eval and predict share — the model from the config, a backend, an optimizer
// and an Executor planned for a given set of batch sizes, with the config's initial weights.
//
// Members are heap-held and never move: the Executor keeps references to the model, the backend
// and the optimizer. Data loading is separate (load_run_data) because predict reads its own input.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "datasets/batch_loader.h"
#include "datasets/dataset.h"
#include "lib/backend/backend_registry.h"
#include "lib/config/config.h"
#include "lib/model/executor.h"
#include "lib/model/model.h"
#include "lib/model/pipeline.h"
#include "lib/train/target_scale.h"

namespace trainer {

struct Session {
  std::unique_ptr<Model> model;
  std::unique_ptr<Backend> backend;
  // Data parallel on the device (GPU replicas): the replicas' NCCL collective; null otherwise.
  // Declared after the backend (whose memory and stream it uses) so that it is destroyed first.
  std::unique_ptr<DeviceCollective> collective;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<Executor> executor;
  // Model parallelism (fit with model.stages or pipeline.micro_batches > 1): the stages, each with
  // its own backend and executor (lib/model/pipeline.h); `backend` and `executor` are then null.
  std::unique_ptr<Pipeline> pipeline;
  int64_t classes = 0;

  // What the loop drives: the pipeline, else the executor.
  StepRunner& runner() { return pipeline ? static_cast<StepRunner&>(*pipeline) : *executor; }
  // The backend's description, or the stages' devices.
  std::string device_description() const;
  // The allocator's peak, or the stages' summed.
  size_t peak_bytes() const;
  // Whether a backend (any stage's) computes in host memory, i.e. trains on the CPU's cores.
  bool trains_on_host() const;
};

// data.loader_threads, or when 0 its default for this session and data: on a GPU,
// default_loader_threads(usable_cores()) (datasets/batch_loader.h), or every usable core but one
// when each row costs a decode or a resize: `d` streamed (its images decoded as batches are drawn)
// or `cropped` (random_resized_crop). On one H200 host's 16 cores, 8 threads decoded and cropped
// ~3,900 JPEGs/s for a resnet18 step of ~5,100. 1 where a backend trains on the CPU's cores,
// which the step uses.
int loader_threads_for(const Config& cfg, const Session& s, const Dataset& d, bool cropped = false);

// The model of the config, checked against data.num_classes (ConfigError on a mismatch; not
// checked while the classes are still to be discovered from the data, num_classes 0).
std::unique_ptr<Model> make_model(const Config& cfg);

// Backend + executor for these batch sizes, parameters initialized from cfg.seed.
// `model`: one made by make_model already, or null to make it here.
// `comm`: data parallel, this process is one of its ranks (ExecutorOptions::comm); the ranks'
// dropout and augmentation draws differ (rank r > 0 mixes r into the seed). On a backend without
// host memory (GPU ranks) the ranks join a device collective here (join_device_collective).
// `stages`: split the model as model.stages and pipeline.micro_batches say (fit); without either,
// or when false (eval, predict, bench: one device), one executor runs the whole model. The device
// of stage k: the CPU, the one GPU, or the k-th GPU of a list (which must list one per stage).
std::unique_ptr<Session> open_session(const Config& cfg, const DeviceRequest& device,
                                      std::vector<int64_t> batch_sizes,
                                      std::unique_ptr<Model> model = nullptr, Communicator* comm = nullptr,
                                      bool stages = false);

// The training and validation data of the config (validation: data.validation, else data.split's
// part of the training data, datasets/split.h: seeded by train.seed, so fit, eval and --resume
// split alike). need_train=false still reads data.train when the validation split comes from it,
// when the classes are discovered (data.num_classes left out), and when it is a CSV whose learned
// encoding is not recorded yet (the validation data is encoded as the training data is). The
// validation source is read with what the training source learned. When both are read, a warning
// names every class that one side has and the other lacks. With data.normalize_targets the
// targets of both are standardized (lib/train/target_scale.h).
struct RunData {
  Dataset train, val;
  bool has_train = false, has_val = false;
  YAML::Node learned;                    // keys data.train learned (lib/data/data_sources.h)
  std::vector<std::string> class_names;  // data.class_names, or the names the training data gave
  int64_t num_classes = 0;               // data.num_classes, or what the training data gave
  // data.normalize_targets: the statistics the targets of train and val were standardized with
  // (recorded by the run, else learned from the training rows); empty when off.
  TargetScale target_scale;
};
RunData load_run_data(const Config& cfg, bool need_train);
// What the config's loss takes as targets: class indices, or one float value per model output.
TargetLayout target_layout(const Config& cfg);

// The config with the classes the data gave (data.num_classes left out), and the model's output
// checked against them (ConfigError as make_model's).
Config with_data_classes(const Config& cfg, const RunData& data, const Model& model);

// The batch sizes a pass over n samples uses: full batches and the tail.
void add_batch_sizes(std::vector<int64_t>& sizes, int64_t n, int64_t batch, bool drop_last);

// data.normalize for this dataset: the config's scale for every source and every file type
// (given, or data.train's default: Config's DataConfig::scale_known); only when that is unknown
// does the dataset's own dtype decide (1/255 for uint8, 1 otherwise).
Normalization normalization_for(const Config& cfg, const Dataset& d);

// One pass over `loader` (in order) with eval_step; returns the accumulated sums. Stops early and
// sets *complete = false when `stop` says so between batches.
MetricSums evaluate_pass(StepRunner& ex, BatchLoader& loader, const std::function<bool()>& stop = {},
                         bool* complete = nullptr);

}  // namespace trainer
