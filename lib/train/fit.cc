// The training loop. One FitRun holds everything a run needs and walks through:
//
//   setup     data, loaders, session (model, backend, executor) — every config and data error
//             fails here, before any step; then --resume restores the newest checkpoint;
//   epochs    per step: lr from the schedule -> train_step (gradient clipping runs as the
//             executor's gradient hook) -> live progress -> interrupt check;
//             per epoch: metrics, validation, epoch line / JSON / CSV / event, best weights,
//             early stopping, plateau schedule, periodic checkpoint;
//   finish    restore best weights (early stopping), final weights, class report, summary.
// An interrupt (SIGINT/SIGTERM, or FitOptions::stop_after_step) lets the current step finish,
// writes a checkpoint (mid-epoch checkpoints carry the batch position and the partial metric
// sums) and throws InterruptedError naming it.
//
// Data parallel (FitOptions::comm with several ranks): every rank runs this same loop on its shard
// of each batch; the executor all-reduces the gradients, and every decision here (metrics, early
// stopping, schedules, divergence, stop requests) is taken on all-reduced values, so all ranks
// take it at the same step. Rank 0 alone writes the run directory.
#include "lib/train/fit.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <limits>
#include <memory>
#include <ostream>

#include "datasets/file_bytes.h"
#include "lib/core/elapsed.h"
#include "lib/core/error.h"
#include "lib/core/shard.h"
#include "lib/core/usable_cores.h"
#include "lib/data/data_sources.h"
#include "lib/data/input_files.h"
#include "lib/keys/node_reader.h"
#include "lib/keys/yaml_floats.h"
#include "lib/metrics/metrics.h"
#include "lib/train/callbacks.h"
#include "lib/train/checkpointing.h"
#include "lib/train/data_parallel.h"
#include "lib/train/divergence.h"
#include "lib/train/run_claim.h"
#include "lib/train/run_dir.h"
#include "lib/train/schedules.h"
#include "lib/train/session.h"

namespace trainer {

static std::atomic<bool> g_stop{false};
void request_stop() { g_stop = true; }
bool stop_requested() { return g_stop.load(); }

namespace {

using Clock = std::chrono::steady_clock;

// A path as one shell word: as it is when it holds only safe characters, else in single quotes.
std::string shell_quote(const std::string& s) {
  const bool safe = !s.empty() && s.find_first_not_of(
                                      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                      "0123456789_-+=.,/:@%") == std::string::npos;
  if (safe) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// From the first step on, a signal stops the run after the current step and saves a checkpoint;
// the reads that this saving does (listing the checkpoints to prune) must not be interrupted by
// the same signal, as reads during start-up are.
class ReadsNotInterrupted {
 public:
  ReadsNotInterrupted() : saved_(read_stop_check()) { set_read_stop_check(nullptr); }
  ~ReadsNotInterrupted() { set_read_stop_check(saved_); }
  ReadsNotInterrupted(const ReadsNotInterrupted&) = delete;
  ReadsNotInterrupted& operator=(const ReadsNotInterrupted&) = delete;

 private:
  bool (*saved_)();
};

class FitRun {
 public:
  FitRun(const Config& cfg, const FitOptions& opt, std::ostream& out)
      : cfg_(cfg),
        opt_(opt),
        comm_(opt.comm ? *opt.comm : single_),
        rep_(opt.report, out),
        t_start_(Clock::now()),
        growth_(cfg.loss_config.task(1) != Task::regression) {}

  FitResult run() {
    try {
      setup();
    } catch (...) {
      if (!run_) claim_.release_unused();  // a failed start leaves no empty --out behind
      throw;
    }
    // A signal during start-up (data loading, planning): stop before the first step, saving nothing.
    if (comm_.any(stop_requested())) {
      if (run_) run_->event({{"event", "interrupted"}, {"epoch", st_.epochs_done + 1}, {"step", t_}});
      throw InterruptedError(
          std::string("interrupted before training started; nothing was trained or saved") +
          (run_ && !opt_.resume_dir.empty() ? "; continue the run with: " + resume_command() : ""));
    }
    ReadsNotInterrupted reads_complete;
    for (int64_t epoch = st_.epochs_done + 1; epoch <= cfg_.epochs && !es_->stopped(); ++epoch)
      if (!run_epoch(epoch)) break;
    return finish();
  }

 private:
  void setup();
  void resume(const CheckpointInfo& ck);
  int resume_threads(const CheckpointInfo& ck) const;
  void restore_summary(const Json& j);
  bool run_epoch(int64_t epoch);  // false: stop training (early stopping)
  bool stop_now() const {
    return stop_requested() || (opt_.stop_after_step > 0 && t_ >= opt_.stop_after_step);
  }
  // stop_now() on any rank (each rank calls it at the same points).
  bool agree_stop() { return comm_.any(stop_now()); }
  bool root() const { return comm_.rank() == 0; }
  // One pass over the validation data: every rank's shard with rank 0's buffers, the sums of all.
  MetricSums evaluate(bool* complete);
  std::string resume_command() const;
  [[noreturn]] void interrupt(int64_t epoch, int64_t batches_done, const MetricSums& partial);
  // A training batch that could not be read (a streamed image that does not decode) after
  // `batches_done` batches of `epoch`: one process saves what it trained, then the error with the
  // command that continues. Several processes rethrow (launcher_world_size: mpirun ends them all).
  [[noreturn]] void data_failed(const DataError& e, int64_t epoch, int64_t batches_done, int64_t skipped,
                                const MetricSums& sums);
  void fill_state(int64_t epochs_done, int64_t batches_done, const MetricSums& partial);
  CheckpointInfo checkpoint();
  MetricList train_metrics(const MetricSums& sums) const;
  // The non-finite guard (divergence.h): ends the run when on_nan says so.
  void check_nonfinite(int64_t epoch, const NonfiniteRecord& r);
  // nonfinite: `what` names the non-finite values; otherwise it is the loss growth's sentence.
  [[noreturn]] void diverged(int64_t epoch, const std::string& what, int64_t step, bool nonfinite = true);
  Json summary_record();
  FitResult finish();

  Config cfg_;  // data.num_classes and data.class_names filled in when the data gives them
  const FitOptions& opt_;
  SingleProcess single_;  // the world without FitOptions::comm
  Communicator& comm_;
  Reporter rep_;
  Clock::time_point t_start_;
  RunData data_;
  std::unique_ptr<BatchLoader> train_loader_, val_loader_;
  std::unique_ptr<Session> s_;
  RunClaim claim_;  // the run directory's lock; declared before run_: released after its files close
  std::unique_ptr<RunDir> run_;
  std::unique_ptr<LrSchedule> sched_;
  std::unique_ptr<EarlyStopping> es_;
  // The run's best (done line, summary.json, best.safetensors, best events): early stopping's
  // tracker when early stopping is on, else own_best_ over checkpoint.best (monitor.h).
  MonitorTracker own_best_;
  bool best_is_es_ = false;
  const MonitorTracker& best() const { return best_is_es_ ? es_->tracker() : own_best_; }
  HostWeights es_best_;  // early stopping's best weights (restore_best)
  TrainState st_;
  YAML::Node resolved_;
  int64_t t_ = 0;
  int64_t epoch_t0_ = 0;  // updates before the current epoch's first batch
  LossGrowthWatch growth_;
  MetricSums last_val_;
  FitResult result_;
  std::string status_ = "completed";
};

// Batchnorm in training normalizes by the batch's statistics; with one value per channel (a
// batch of 1 on (None, C) inputs) every output is its bias and nothing is learned. PyTorch
// refuses it ("Expected more than 1 value per channel when training"); so does fit, for every
// training batch size (the full batch, the last one, and each replica's share of them).
static void check_batchnorm_batches(const Model& model, const std::vector<int64_t>& train_sizes, int ranks,
                                    bool sync_batchnorm, int64_t samples, int64_t batch) {
  const bool sharded = ranks > 1 && !sync_batchnorm;
  const std::vector<int64_t> per_replica = sharded ? shard_batch_sizes(train_sizes, ranks) : train_sizes;
  int64_t rows = INT64_MAX;  // the smallest share that trains (a replica with none skips the step)
  for (int64_t r : per_replica)
    if (r > 0) rows = std::min(rows, r);
  for (size_t i = 0; i < model.layers().size(); ++i) {
    const Layer& layer = *model.layers()[i];
    if (layer.type() != "batchnorm") continue;
    const Shape& in = layer.input_shape();
    if (rows * (in.numel() / in[0]) > 1) continue;
    const bool tail = samples > batch && samples % batch == 1;
    throw ConfigError(
        "model.layers." + std::to_string(i) + " (batchnorm '" + layer.name() + "'): a training batch of " +
        std::to_string(rows) + " sample" + (sharded ? " per replica" : "") +
        " gives it 1 value per channel on " + in.batched_str() +
        " inputs, which it normalizes to 0: it would learn nothing, and PyTorch refuses this too (\"Expected "
        "more than 1 value per channel when training\"); " +
        (tail ? "the last batch holds 1 of the " + std::to_string(samples) +
                    " training samples: set data.drop_last: true or another data.batch_size"
              : "use a data.batch_size of at least " + std::to_string(sharded ? 2 * ranks : 2)));
  }
}

void FitRun::setup() {
  // One notion of best: the epoch restore_best puts back is the one best.safetensors holds.
  const EarlyStoppingConfig& es = cfg_.early_stopping;
  if (es.enabled && es.restore_best && cfg_.checkpoint.best != "none" && cfg_.checkpoint.best != es.monitor)
    throw ConfigError("checkpoint.best is '" + cfg_.checkpoint.best + "' but early_stopping.monitor is '" +
                      es.monitor +
                      "': with early_stopping.restore_best the run has one best epoch, so they must name the "
                      "same monitor; set checkpoint.best: auto (it follows early stopping) or "
                      "early_stopping.restore_best: false");
  // Paths before the data is read and the model built: the run directory, then the data files.
  if (!opt_.resume_dir.empty())
    claim_ = claim_resume_dir(opt_.resume_dir, root());
  else if (!opt_.out_dir.empty() && root())
    claim_ = claim_out_dir(opt_.out_dir);
  check_input_files(cfg_.data.train, cfg_.data.validation, cfg_.file, true);
  auto model = make_model(cfg_);  // config errors before data errors
  data_ = load_run_data(cfg_, true);
  cfg_ = with_data_classes(cfg_, data_, *model);
  const int64_t B = cfg_.data.batch_size;
  std::vector<int64_t> sizes;
  add_batch_sizes(sizes, data_.train.size(), B, cfg_.data.drop_last);
  const int rank = comm_.rank(), ranks = comm_.size();
  check_batchnorm_batches(*model, sizes, ranks, cfg_.sync_batchnorm, data_.train.size(), B);
  // One loader thread until the device is known (loader_threads_for, below).
  RandomResizedCrop crop;
  if (cfg_.data.augment.random_resized_crop) {
    const AugmentConfig& a = cfg_.data.augment;
    crop = {cfg_.input_shape[1], cfg_.input_shape[2], a.rrc_scale[0],
            a.rrc_scale[1],      a.rrc_ratio[0],      a.rrc_ratio[1]};
  }
  train_loader_ =
      std::make_unique<BatchLoader>(data_.train, B, cfg_.data.shuffle, cfg_.data.drop_last,
                                    normalization_for(cfg_, data_.train), cfg_.seed, rank, ranks, 1, crop);
  if (data_.has_val) {
    add_batch_sizes(sizes, data_.val.size(), B, false);
    val_loader_ = std::make_unique<BatchLoader>(data_.val, B, false, false,
                                                normalization_for(cfg_, data_.val), cfg_.seed, rank, ranks);
  }
  sizes = shard_batch_sizes(sizes, ranks);  // one rank: the sizes themselves
  DeviceRequest device = opt_.device;
  if (!opt_.resume_dir.empty()) device.threads = resume_threads(claim_.newest);
  s_ = open_session(cfg_, device, sizes, std::move(model), &comm_, /*stages=*/true);
  train_loader_->set_threads(loader_threads_for(cfg_, *s_, data_.train, crop.active()));
  if (val_loader_) val_loader_->set_threads(loader_threads_for(cfg_, *s_, data_.val));
  resolved_ = YAML::Clone(cfg_.resolved);
  // What the data taught (a CSV's encoding, discovered classes): eval and predict of this run
  // read their data the same way.
  record_learned(resolved_["data"], data_.learned, data_.class_names, cfg_.data.num_classes);
  if (data_.target_scale.on())
    resolved_["data"]["target_statistics"] = target_statistics_node(data_.target_scale);
  resolved_["model"]["layers"] = s_->model->describe_layers();

  const double lr = base_lr(cfg_.optimizer, ranks);
  sched_ = std::make_unique<LrSchedule>(cfg_.schedule, lr, train_loader_->batches_per_epoch(), cfg_.epochs);
  es_ = std::make_unique<EarlyStopping>(cfg_.early_stopping);
  const std::string& es_monitor = cfg_.early_stopping.monitor;
  best_is_es_ = es_->enabled() && (cfg_.checkpoint.best == es_monitor || cfg_.checkpoint.best == "none");
  if (!best_is_es_)
    own_best_ = MonitorTracker(
        cfg_.checkpoint.best != "none" ? cfg_.checkpoint.best : (data_.has_val ? "val_loss" : "loss"), 0.0);
  st_.optimizer = cfg_.optimizer.type;
  st_.seed = cfg_.seed;
  st_.batch_size = B;
  st_.train_samples = data_.train.size();
  st_.cpu_threads = s_->backend ? s_->backend->host_threads() : 0;

  spdlog::info("device: {}", s_->device_description());
  spdlog::info("model: {} layers, {} parameters; train {} samples{}", s_->model->layers().size(),
               s_->model->num_params(), data_.train.size(),
               data_.has_val ? ", validation " + std::to_string(data_.val.size()) + " samples" : "");
  spdlog::info("memory reserved before the first step: {}", format_bytes(s_->runner().planned_bytes()));
  if (ranks > 1)
    spdlog::info(
        "data parallel: {}; each batch of {} split into {} shards of {}{} rows, gradients all-reduced{}",
        comm_.description(), B, ranks, B / ranks,
        B % ranks ? "-" + std::to_string(max_shard_rows(B, ranks)) : std::string(),
        gradient_reduction(s_->collective.get(), s_->executor->gradient_buckets()));
  if (ranks > 1 && cfg_.sync_batchnorm)
    spdlog::info(
        "sync_batchnorm: batchnorm statistics are synchronized over {} replicas (the whole batch of {} rows; "
        "two all-reduces per batchnorm layer and step, {})",
        ranks, B, s_->collective ? "on the devices" : "on the host");
  if (cfg_.optimizer.scale_lr_linear)
    spdlog::info("lr {:g} x {} replica{} = {:g} (scale_lr: linear)", cfg_.optimizer.lr, ranks,
                 ranks == 1 ? "" : "s", lr);

  if (!opt_.resume_dir.empty()) {
    resume(claim_.newest);
  } else if (!opt_.out_dir.empty() && root()) {
    run_ = std::make_unique<RunDir>(opt_.out_dir, false);
    run_->event({{"event", "start"},
                 {"config", cfg_.file},
                 {"device", s_->device_description()},
                 {"epochs", cfg_.epochs},
                 {"params", s_->model->num_params()}});
  }
  if (run_) run_->write_config(resolved_);
  result_.params = s_->model->num_params();
  broadcast_state(comm_, s_->runner(), *s_->model);  // the replicas start from rank 0's state
}

MetricSums FitRun::evaluate(bool* complete) {
  broadcast_buffers(comm_, s_->runner(), *s_->model);
  const MetricSums local = evaluate_pass(
      s_->runner(), *val_loader_, [this] { return agree_stop(); }, complete);
  return in_target_units(all_reduce_sums(comm_, local), data_.target_scale);
}

// oneDNN's convolution gradients depend on the CPU's thread count, and the default count follows
// the machine's load (CpuBackend::default_threads): a resumed CPU run that asks for no count takes
// the one its checkpoint was trained with, and so goes on with an uninterrupted run's bits.
int FitRun::resume_threads(const CheckpointInfo& ck) const {
  const int asked = opt_.device.threads;
  const int64_t saved = ck.cpu_threads;
  if (saved <= 0 || opt_.device.device != "cpu") return asked;
  const std::string differ =
      "the resumed epochs may differ in the last bits from an uninterrupted run's (oneDNN's convolution "
      "gradients depend on the thread count)";
  if (asked > 0) {
    if (asked != saved)
      spdlog::warn("--resume: {} CPU threads as asked, the checkpoint was trained with {}: {}", asked, saved,
                   differ);
    return asked;
  }
  if (std::getenv("OMP_NUM_THREADS")) return asked;  // the user's OpenMP settings decide
  if (saved > usable_cores()) {
    spdlog::warn(
        "--resume: the checkpoint was trained with {} CPU threads, this process may use {} cores: {}", saved,
        usable_cores(), differ);
    return asked;
  }
  spdlog::info("CPU: {} thread{}, as the checkpoint was trained with (--threads to choose)", saved,
               saved == 1 ? "" : "s");
  return int(saved);
}

void FitRun::resume(const CheckpointInfo& ck) {
  const std::string& dir = opt_.resume_dir;
  TrainState saved = load_checkpoint(ck, *s_, cfg_);
  if (saved.batches_done > 0 &&
      (saved.batch_size != st_.batch_size || saved.train_samples != st_.train_samples))
    throw ConfigError("--resume: " + ck.state() +
                      " was saved in the middle of an epoch with data.batch_size " +
                      std::to_string(saved.batch_size) + " and " + std::to_string(saved.train_samples) +
                      " training samples; the config gives " + std::to_string(st_.batch_size) + " and " +
                      std::to_string(st_.train_samples) + ": resume with the same data and batch size");
  if (saved.seed != st_.seed)
    spdlog::warn(
        "--resume: the checkpoint was trained with seed {}, the config says {}: shuffles and dropout "
        "masks of the remaining epochs follow the new seed",
        saved.seed, st_.seed);
  const auto keep = st_;
  st_ = saved;
  st_.optimizer = keep.optimizer;
  st_.seed = keep.seed;
  st_.batch_size = keep.batch_size;
  st_.train_samples = keep.train_samples;
  st_.cpu_threads = keep.cpu_threads;
  t_ = st_.step;
  growth_.restore(st_.first_loss, st_.first_loss_epoch);
  try {  // the components read their own records: a wrong type there is damage too
    sched_->restore(st_.schedule);
    es_->restore(st_.early_stopping);
    if (!best_is_es_) own_best_.restore(st_.best);
  } catch (const nlohmann::json::exception& e) {
    throw DataError("--resume " + dir + ": " + ck.state() +
                    ": the training state's schedule, early-stopping or best record is damaged: " + e.what() +
                    "; move the damaged checkpoint away to resume from an older one");
  }
  restore_summary(st_.summary);
  if (root()) {
    run_ = std::make_unique<RunDir>(dir, true);
    run_->truncate_metrics(st_.epochs_done);
    run_->event({{"event", "resume"},
                 {"checkpoint", ck.weights()},
                 {"epochs_done", st_.epochs_done},
                 {"batches_done", st_.batches_done},
                 {"step", st_.step},
                 {"device", s_->device_description()},
                 {"epochs", cfg_.epochs}});
  }
  spdlog::info("resuming from {} (epoch {}{}, step {})", ck.weights(),
               st_.epochs_done + (st_.batches_done ? 1 : 0),
               st_.batches_done ? ", batch " + std::to_string(st_.batches_done) : "", st_.step);
  // restore_best needs the best weights: checkpoints/best.safetensors when it is of that epoch.
  if (es_->enabled() && cfg_.early_stopping.restore_best && es_->best_epoch() > 0 && !es_->stopped()) {
    const std::string path = RunDir::checkpoints_of(dir) + "/best.safetensors";
    try {
      if (es_->best_epoch() == st_.epochs_done && st_.batches_done == 0) {
        es_best_ = download_weights(*s_);
      } else if (std::filesystem::exists(path) && weights_epoch(path) == es_->best_epoch()) {
        es_best_ = load_weights(path, *s_->model, "best weights");
      } else {
        spdlog::warn(
            "--resume: the weights of early stopping's best epoch {} are not in {}; restore_best will "
            "restore only a later best",
            es_->best_epoch(), path);
      }
    } catch (const DataError& e) {
      spdlog::warn("--resume: cannot read the best weights: {}", e.what());
    }
  }
  if (es_->stopped()) {
    status_ = "already_stopped";
    rep_.note("the run stopped early at epoch " + std::to_string(es_->stopped_epoch()) +
              "; nothing to resume\n");
  } else if (st_.epochs_done >= cfg_.epochs) {
    status_ = "already_complete";
    rep_.note("the run has finished all " + std::to_string(cfg_.epochs) +
              " epochs; raise --epochs to train further\n");
  }
}

// The run's values from before the resume: a resumed run reports its best validation accuracy
// over every epoch, and one with nothing left to train reports the final values it had.
void FitRun::restore_summary(const Json& j) {
  if (!j.is_object()) return;  // a checkpoint of an older version
  const auto take = [&](const char* key, double* to) {
    const auto it = j.find(key);
    if (it != j.end() && it->is_number()) *to = it->get<double>();
  };
  take("final_lr", &result_.final_lr);
  take("final_train_loss", &result_.final_train_loss);
  take("final_train_accuracy", &result_.final_train_accuracy);
  take("final_val_loss", &result_.final_val_loss);
  take("final_val_accuracy", &result_.final_val_accuracy);
  take("best_val_accuracy", &result_.best_val_accuracy);
}

void FitRun::fill_state(int64_t epochs_done, int64_t batches_done, const MetricSums& partial) {
  st_.epochs_done = epochs_done;
  st_.batches_done = batches_done;
  st_.step = t_;
  st_.scalars = s_->runner().host_scalars();
  st_.partial = batches_done ? partial : MetricSums{};
  st_.schedule = sched_->state();
  st_.early_stopping = es_->state();
  st_.best = best().state();
  st_.summary = {{"final_lr", result_.final_lr},
                 {"final_train_loss", number_or_null(result_.final_train_loss)},
                 {"final_train_accuracy", number_or_null(result_.final_train_accuracy)},
                 {"final_val_loss", number_or_null(result_.final_val_loss)},
                 {"final_val_accuracy", number_or_null(result_.final_val_accuracy)},
                 {"best_val_accuracy", number_or_null(result_.best_val_accuracy)}};
  st_.first_loss = growth_.first_loss();
  st_.first_loss_epoch = growth_.first_epoch();
  st_.has_loss_scale = s_->runner().loss_scaling();
  if (st_.has_loss_scale) st_.loss_scale = s_->runner().read_loss_scale();
}

CheckpointInfo FitRun::checkpoint() {
  const double seconds = st_.seconds;
  st_.seconds += seconds_since(t_start_);
  CheckpointInfo ck = save_checkpoint(run_->checkpoints(), *s_, st_, dump_yaml(resolved_));
  st_.seconds = seconds;
  prune_checkpoints(run_->checkpoints(), cfg_.checkpoint.keep_last);
  run_->event({{"event", "checkpoint"},
               {"path", ck.weights()},
               {"epochs_done", ck.epochs_done},
               {"batches_done", ck.batches_done},
               {"step", ck.step}});
  return ck;
}

// The command that continues this run as it was started: the run directory's config.yaml holds
// the config with every --set and dedicated flag applied (epochs, batch size, seed, the device
// with its memory cap and growth, math, threads).
std::string FitRun::resume_command() const { return "trainer fit --resume " + shell_quote(run_->path()); }

void FitRun::data_failed(const DataError& e, int64_t epoch, int64_t batches_done, int64_t skipped,
                         const MetricSums& sums) {
  if (!run_ || comm_.size() > 1 || batches_done <= skipped) throw e;  // nothing new to save
  check_nonfinite(epoch, sums.nonfinite);
  fill_state(epoch - 1, batches_done, sums);
  const CheckpointInfo ck = checkpoint();
  run_->event({{"event", "data_error"}, {"epoch", epoch}, {"step", t_}, {"checkpoint", ck.weights()}});
  throw DataError(
      std::string(e.what()) + "; the " + std::to_string(batches_done) + " batches of epoch " +
      std::to_string(epoch) + " trained so far are saved in " + ck.weights() +
      "; make the file readable again (a resumed epoch needs the same files), then continue with: " +
      resume_command());
}

void FitRun::interrupt(int64_t epoch, int64_t batches_done, const MetricSums& partial) {
  std::string where = "epoch " + std::to_string(epoch) + ", step " + std::to_string(t_);
  if (!run_) throw InterruptedError("interrupted at " + where + " (no run directory: nothing saved)");
  fill_state(epoch - 1, batches_done, partial);
  CheckpointInfo ck = checkpoint();
  run_->event({{"event", "interrupted"}, {"epoch", epoch}, {"step", t_}, {"checkpoint", ck.weights()}});
  throw InterruptedError("interrupted at " + where + "; checkpoint saved: " + ck.weights() +
                         "; continue with: " + resume_command());
}

bool FitRun::run_epoch(int64_t epoch) {
  StepRunner& ex = s_->runner();
  const int64_t C = s_->classes, N = train_loader_->batches_per_epoch();
  const bool resumed_here = epoch == st_.epochs_done + 1 && st_.batches_done > 0;
  const int64_t skip = resumed_here ? std::min(st_.batches_done, N) : 0;
  const auto t0 = Clock::now();
  rep_.epoch_begin(epoch, cfg_.epochs, N, skip);
  ex.reset_metrics();
  // A resumed epoch goes on from the saved device sums, so its loss is the uninterrupted one.
  // Data parallel: rank 0 carries the saved sums into the all-reduce; every rank carries the
  // non-finite record (its steps and kinds are the same on every rank, its samples are summed).
  if (resumed_here) {
    MetricSums carried = st_.partial;
    if (!root()) {
      carried = MetricSums{};
      carried.nonfinite = st_.partial.nonfinite;
      carried.nonfinite.samples = 0;
    }
    ex.restore_metrics(carried);
  }
  epoch_t0_ = t_ - skip;
  train_loader_->start_epoch(epoch - 1, skip);  // not reading the batches trained before the resume
  const float* x;
  const void* y;
  int64_t rows, global_rows, done = skip;
  bool interrupted = false;
  try {
    while (done < N && train_loader_->next(&x, &y, &rows, &global_rows)) {
      const double lr = sched_->lr_at(t_ + 1);
      ex.train_step(rows, x, y, ++t_, float(lr), global_rows);
      ++done;
      if (rep_.wants_refresh(done)) {
        // A sync the live line makes anyway. Data parallel: rank 0's shard only, and no divergence
        // check (the live line comes at different steps on different ranks; the epoch's end checks).
        const MetricSums running = ex.read_metrics();
        if (comm_.size() == 1) check_nonfinite(epoch, running.nonfinite);
        rep_.refresh(done, train_metrics(running));
      }
      if (agree_stop()) {
        interrupted = true;
        break;
      }
    }
  } catch (const DataError& e) {
    data_failed(e, epoch, done, skip, ex.read_metrics());
  }
  const MetricSums train_sums = all_reduce_sums(comm_, ex.read_metrics());
  check_nonfinite(epoch, train_sums.nonfinite);  // before any checkpoint of these weights
  if (interrupted) interrupt(epoch, done, train_sums);
  const double train_seconds = seconds_since(t0);
  const auto train_m = train_metrics(train_sums);
  MetricList val_m;
  if (data_.has_val) {
    bool complete = true;
    try {
      last_val_ = evaluate(&complete);
    } catch (const DataError& e) {
      data_failed(e, epoch, N, skip, train_sums);  // the epoch's training is saved; resuming evaluates again
    }
    if (!complete) interrupt(epoch, N, train_sums);
    val_m = compute_metrics(last_val_, cfg_.metrics, C, cfg_.loss_config.task(C));
  }
  const double seconds = seconds_since(t0);
  const double loss = train_m.front().second;
  // Each step's loss was finite (the guard), so only the float sum itself can have overflowed,
  // or on_nan: skip skipped every batch.
  if (!std::isfinite(loss))
    diverged(epoch, "loss (the sum of the epoch's losses overflowed, or every batch was skipped)", 0);
  const std::string growth = growth_.on_epoch(epoch, loss);
  if (!growth.empty() && cfg_.divergence_stop) diverged(epoch, growth, 0, false);
  if (!growth.empty())
    spdlog::warn("{}; lower optimizer.lr or set clip_grad_norm (train.divergence: warn goes on training)",
                 growth);
  const int64_t skipped = int64_t(train_sums.nonfinite.steps);
  if (skipped > 0) {
    st_.skipped_batches += skipped;
    spdlog::warn(
        "epoch {}: skipped {} batch(es) with a non-finite {} (train.on_nan: skip), the first at step {}",
        epoch, skipped, nonfinite_what(train_sums.nonfinite.what),
        (long long)train_sums.nonfinite.first_step);
  }
  const double lr = sched_->lr_at(std::max<int64_t>(t_, 1));

  // Records: the epoch line, the JSON object (stdout in json mode, events.jsonl), metrics.csv.
  EpochRecord rec = epoch_record(epoch, cfg_.epochs, t_, train_m, val_m, lr, !sched_->is_constant(), seconds,
                                 1000.0 * train_seconds / double(std::max<int64_t>(done - skip, 1)));
  if (skipped > 0) {
    rec.line += " skipped=" + std::to_string(skipped);
    rec.json["skipped_batches"] = skipped;
  }
  if (ex.loss_scaling()) {  // the scale now, and the steps skipped for overflow so far
    const LossScaleState ls = ex.read_loss_scale();
    rec.line += fmt::format(" loss_scale={:g} overflow_steps={}", ls.scale, ls.overflow_steps);
    rec.json["loss_scale"] = ls.scale;
    rec.json["overflow_steps"] = ls.overflow_steps;
  }
  rep_.epoch_end(rec.line, rec.json);
  if (run_) {
    run_->metrics_row(epoch, rec.columns);
    run_->event(rec.json);
  }
  result_.final_train_loss = loss;
  result_.final_train_accuracy = metric_value(train_m, val_m, "accuracy");
  result_.final_lr = lr;
  if (data_.has_val) {
    result_.final_val_loss = metric_value(train_m, val_m, "val_loss");
    result_.final_val_accuracy = metric_value(train_m, val_m, "val_accuracy");
    if (result_.final_val_accuracy > result_.best_val_accuracy)
      result_.best_val_accuracy = result_.final_val_accuracy;
  }

  // Callbacks: early stopping and the run's best (one tracker when early stopping is on), the
  // best weights, the plateau schedule.
  bool improved = false;
  const bool stop = es_->on_epoch_end(epoch, train_m, val_m, &improved);
  if (!best_is_es_) improved = own_best_.observe(epoch, train_m, val_m);
  if (improved && (cfg_.early_stopping.restore_best || (run_ && cfg_.checkpoint.best != "none"))) {
    HostWeights w = download_weights(*s_);
    if (run_ && cfg_.checkpoint.best != "none") {
      save_weights(run_->checkpoints() + "/best.safetensors", *s_->model, w,
                   {{"epoch", std::to_string(epoch)},
                    {"monitor", best().monitor()},
                    {"value", std::to_string(best().best())}});
      run_->event(
          {{"event", "best"}, {"epoch", epoch}, {"monitor", best().monitor()}, {"value", best().best()}});
    }
    if (es_->enabled() && cfg_.early_stopping.restore_best) es_best_ = std::move(w);
  }
  if (sched_->on_epoch_end(epoch, train_m, val_m)) {
    char msg[160];
    std::snprintf(msg, sizeof msg, "reduce_on_plateau: %s has not improved for %lld epochs; lr is now %.4g\n",
                  cfg_.schedule.monitor.c_str(), (long long)cfg_.schedule.patience + 1,
                  sched_->lr_at(t_ + 1));
    rep_.note(msg);
    if (run_) run_->event({{"event", "lr_reduced"}, {"epoch", epoch}, {"lr", sched_->lr_at(t_ + 1)}});
  }
  fill_state(epoch, 0, {});
  const int64_t every = cfg_.checkpoint.every;
  if (run_ && (epoch == cfg_.epochs || stop || (every > 0 && epoch % every == 0))) checkpoint();
  if (stop) {
    status_ = "early_stopped";
    rep_.note("early stopping at epoch " + std::to_string(epoch) + ": " + cfg_.early_stopping.monitor +
              " has not improved for " + std::to_string(cfg_.early_stopping.patience) +
              " epochs (best epoch " + std::to_string(es_->best_epoch()) + ")\n");
    if (run_) run_->event({{"event", "early_stop"}, {"epoch", epoch}, {"best_epoch", es_->best_epoch()}});
  }
  const bool stop_requested_anywhere = comm_.any(stop_requested());
  if (stop_requested_anywhere && !stop && epoch < cfg_.epochs)
    interrupt(epoch + 1, 0, {});  // arrived after the last step
  return !stop;
}

// Fills result_ and returns summary.json's object (without the final weights).
Json FitRun::summary_record() {
  result_.epochs_run = int(st_.epochs_done);
  result_.steps = t_;
  result_.stopped_early = es_->stopped();
  result_.monitor = best().monitor();
  result_.best_value = best().best();
  result_.best_epoch = int(best().best_epoch());
  result_.seconds = st_.seconds + seconds_since(t_start_);
  result_.peak_bytes = s_->peak_bytes();
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  Json sum{{"event", "summary"},
           {"status", status_},
           {"epochs_run", result_.epochs_run},
           {"epochs", cfg_.epochs},
           {"steps", t_},
           {"monitor", result_.monitor},
           {"best_epoch", result_.best_epoch},
           {"best_value", number_or_null(result_.best_value)},
           {"final_lr", result_.final_lr},
           {"seconds", result_.seconds},
           {"params", result_.params},
           {"peak_bytes", result_.peak_bytes},
           {"peak_host_rss_bytes", int64_t(ru.ru_maxrss) * 1024},
           {"device", s_->device_description()}};
  if (data_.has_val) sum["best_val_accuracy"] = number_or_null(result_.best_val_accuracy);
  if (cfg_.clip_grad_norm > 0) sum["clipped_steps"] = s_->runner().read_clip_record().clipped_steps;
  if (cfg_.on_nan_skip) sum["skipped_batches"] = st_.skipped_batches;
  if (s_->runner().loss_scaling()) {
    const LossScaleState ls = s_->runner().read_loss_scale();
    sum["loss_scale"] = {{"scale", ls.scale}, {"overflow_steps", ls.overflow_steps}};
  }
  if (!growth_.warnings().empty()) sum["warnings"] = growth_.warnings();
  if (run_) sum["run_dir"] = run_->path();
  if (comm_.size() > 1) sum["ranks"] = comm_.size();
  return sum;
}

// The loss of the batches that count: skipped batches (on_nan: skip) are not in loss_sum.
MetricList FitRun::train_metrics(const MetricSums& sums) const {
  MetricSums m = in_target_units(sums, data_.target_scale);
  const auto skipped = int64_t(sums.nonfinite.samples);
  if (skipped > 0)
    m.loss_sum = sums.samples > skipped
                     ? sums.loss_sum * double(sums.samples) / double(sums.samples - skipped)
                     : std::numeric_limits<double>::quiet_NaN();
  return compute_metrics(m, cfg_.metrics, s_->classes, cfg_.loss_config.task(s_->classes));
}

void FitRun::check_nonfinite(int64_t epoch, const NonfiniteRecord& r) {
  if (r.steps == 0) return;
  if (cfg_.on_nan_skip && !(r.what & kNonfiniteWeights)) return;  // counted at the epoch's end
  // Weights are never skipped: once they are not finite there is nothing left to train.
  const uint32_t bits =
      (r.what & kNonfiniteWeights) && cfg_.on_nan_skip ? uint32_t(kNonfiniteWeights) : r.first_what;
  diverged(epoch, nonfinite_what(bits), int64_t(r.first_step));
}

// Ends a diverged run: the weights on the device are not saved anywhere, so the newest checkpoint
// stays the last good one; summary.json and the end event say what happened; exit 5.
void FitRun::diverged(int64_t epoch, const std::string& what, int64_t step, bool nonfinite) {
  status_ = "diverged";
  std::string where = "epoch " + std::to_string(epoch);
  if (step > 0)
    where += ", step " + std::to_string(step) + " (batch " + std::to_string(step - epoch_t0_) + " of " +
             std::to_string(train_loader_->batches_per_epoch()) + ")";
  std::string kept = "no run directory";
  if (run_) {
    auto cks = list_checkpoints(run_->checkpoints());
    kept = cks.empty() ? "no checkpoint was saved before it"
                       : "the last good checkpoint is " + cks.back().weights();
    Json sum = summary_record();
    sum["diverged"] = {{"epoch", epoch}, {"step", step}, {"what", what}};
    if (!cks.empty()) sum["last_good_checkpoint"] = cks.back().weights();
    run_->event({{"event", "diverged"}, {"epoch", epoch}, {"step", step}, {"what", what}});
    run_->write_summary(sum);
    run_->event({{"event", "end"}, {"status", status_}});
  }
  if (!nonfinite)
    throw RuntimeError("the training diverged: " + what + "; " + kept + "; lower optimizer.lr" +
                       (cfg_.clip_grad_norm > 0 ? "" : ", set clip_grad_norm") +
                       " (train.divergence: warn only warns and goes on)");
  const bool skip_helps = !cfg_.on_nan_skip && what.find("weights") == std::string::npos;
  throw RuntimeError("the training diverged: non-finite " + what + " at " + where + "; " + kept +
                     "; lower optimizer.lr" + (cfg_.clip_grad_norm > 0 ? "" : ", set clip_grad_norm") +
                     ", check the data normalization" + (skip_helps ? " or set train.on_nan: skip" : ""));
}

FitResult FitRun::finish() {
  const int64_t C = s_->classes;
  std::string report_title = "validation report (last epoch)";
  if (es_->stopped() && cfg_.early_stopping.restore_best && !es_best_.params.empty()) {
    upload_weights(*s_, es_best_);
    report_title = "validation report (restored best epoch " + std::to_string(es_->best_epoch()) + ")";
    rep_.note("restored the weights of epoch " + std::to_string(es_->best_epoch()) + "\n");
    if (data_.has_val) last_val_ = evaluate(nullptr);
  }
  if (data_.has_val && last_val_.samples > 0)
    rep_.note(report_title + ":\n" +
              format_class_report(last_val_, C, cfg_.data.class_names, cfg_.loss_config.task(C)));
  if (run_) {
    result_.run_dir = run_->path();
    result_.final_weights = run_->path() + "/model.safetensors";
    // A resume with nothing left to train keeps the final weights it finds (restored best ones).
    if (status_.rfind("already", 0) != 0 || !std::filesystem::exists(result_.final_weights))
      save_weights(result_.final_weights, *s_->model, download_weights(*s_),
                   {{"epoch", std::to_string(st_.epochs_done)},
                    {"step", std::to_string(t_)},
                    {"trainer.config", dump_yaml(resolved_)}});
  }
  Json sum = summary_record();
  if (run_) sum["weights"] = result_.final_weights;
  for (const auto& w : growth_.warnings()) spdlog::warn("{}", w);
  char text[320];
  std::snprintf(text, sizeof text, "best %s=%.4f (epoch %d) total=%.1fs params=%lld peak_memory=%s%s",
                result_.monitor.c_str(), result_.best_value, result_.best_epoch, result_.seconds,
                (long long)result_.params, format_bytes(result_.peak_bytes).c_str(),
                run_ ? (" run=" + run_->path()).c_str() : "");
  rep_.summary("[" + timestamp_now() + "] done: " + text, sum);
  if (run_) {
    run_->write_summary(sum);
    run_->event({{"event", "end"}, {"status", status_}});
  }
  return result_;
}

}  // namespace

FitResult fit(const Config& cfg, const FitOptions& opt, std::ostream& out) {
  return FitRun(cfg, opt, out).run();
}

}  // namespace trainer
