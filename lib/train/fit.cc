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
#include "lib/train/fit.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <memory>
#include <ostream>

#include "lib/config/node_reader.h"
#include "lib/core/error.h"
#include "lib/metrics/metrics.h"
#include "lib/train/callbacks.h"
#include "lib/train/checkpointing.h"
#include "lib/train/run_dir.h"
#include "lib/train/schedules.h"
#include "lib/train/session.h"

namespace trainer {

static std::atomic<bool> g_stop{false};
void request_stop() { g_stop = true; }
bool stop_requested() { return g_stop.load(); }

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }



class FitRun {
 public:
  FitRun(const Config& cfg, const FitOptions& opt, std::ostream& out)
      : cfg_(cfg), opt_(opt), rep_(opt.report, out), t_start_(Clock::now()) {}

  FitResult run() {
    setup();
    for (int64_t epoch = st_.epochs_done + 1; epoch <= cfg_.epochs && !es_->stopped(); ++epoch)
      if (!run_epoch(epoch)) break;
    return finish();
  }

 private:
  void setup();
  void resume(const std::string& dir);
  bool run_epoch(int64_t epoch);  // false: stop training (early stopping)
  bool stop_now() const { return stop_requested() || (opt_.stop_after_step > 0 && t_ >= opt_.stop_after_step); }
  [[noreturn]] void interrupt(int64_t epoch, int64_t batches_done, const MetricSums& partial);
  void fill_state(int64_t epochs_done, int64_t batches_done, const MetricSums& partial);
  CheckpointInfo checkpoint();
  FitResult finish();

  const Config& cfg_;
  const FitOptions& opt_;
  Reporter rep_;
  Clock::time_point t_start_;
  RunData data_;
  std::unique_ptr<BatchLoader> train_loader_, val_loader_;
  std::unique_ptr<Session> s_;
  std::unique_ptr<RunDir> run_;
  std::unique_ptr<LrSchedule> sched_;
  std::unique_ptr<GradClipper> clipper_;
  std::unique_ptr<EarlyStopping> es_;
  BestTracker best_;
  HostWeights es_best_;  // early stopping's best weights (restore_best)
  TrainState st_;
  YAML::Node resolved_;
  int64_t t_ = 0;
  MetricSums last_val_;
  FitResult result_;
  std::string status_ = "completed";
};

void FitRun::setup() {
  auto model = make_model(cfg_);  // config errors before data errors
  data_ = load_run_data(cfg_, true);
  const int64_t B = cfg_.data.batch_size;
  std::vector<int64_t> sizes;
  add_batch_sizes(sizes, data_.train.size(), B, cfg_.data.drop_last);
  train_loader_ = std::make_unique<BatchLoader>(data_.train, B, cfg_.data.shuffle, cfg_.data.drop_last,
                                                normalization_for(cfg_, data_.train), cfg_.seed);
  if (data_.has_val) {
    add_batch_sizes(sizes, data_.val.size(), B, false);
    val_loader_ = std::make_unique<BatchLoader>(data_.val, B, false, false, normalization_for(cfg_, data_.val), cfg_.seed);
  }
  s_ = open_session(cfg_, opt_.device, sizes, std::move(model));
  resolved_ = YAML::Clone(cfg_.resolved);
  resolved_["model"]["layers"] = s_->model->describe_layers();

  sched_ = std::make_unique<LrSchedule>(cfg_.schedule, cfg_.optimizer.lr, train_loader_->batches_per_epoch(), cfg_.epochs);
  es_ = std::make_unique<EarlyStopping>(cfg_.early_stopping);
  const std::string fallback = data_.has_val ? "val_loss" : "loss";
  best_ = BestTracker(cfg_.checkpoint.best != "none" ? cfg_.checkpoint.best : fallback);
  if (cfg_.clip_grad_norm > 0) {
    clipper_ = std::make_unique<GradClipper>(*s_->model, *s_->backend, cfg_.clip_grad_norm);
    s_->executor->set_gradient_hook([this](float* g) { (*clipper_)(g); });
  }
  st_.optimizer = cfg_.optimizer.type;
  st_.seed = cfg_.seed;
  st_.batch_size = B;
  st_.train_samples = data_.train.size();

  spdlog::info("device: {}", s_->backend->description());
  spdlog::info("model: {} layers, {} parameters; train {} samples{}", s_->model->layers().size(),
               s_->model->num_params(), data_.train.size(),
               data_.has_val ? ", validation " + std::to_string(data_.val.size()) + " samples" : "");
  spdlog::info("memory reserved before the first step: {}", format_bytes(s_->executor->planned_bytes()));

  if (!opt_.resume_dir.empty()) {
    resume(opt_.resume_dir);
  } else if (!opt_.out_dir.empty()) {
    run_ = std::make_unique<RunDir>(opt_.out_dir, false);
    run_->event({{"event", "start"}, {"config", cfg_.file}, {"device", s_->backend->description()},
                 {"epochs", cfg_.epochs}, {"params", s_->model->num_params()}});
  }
  if (run_) run_->write_config(resolved_);
  result_.params = s_->model->num_params();
}

void FitRun::resume(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw UsageError("--resume " + dir + ": no such run directory");
  auto cks = list_checkpoints(dir + "/checkpoints");
  if (cks.empty()) throw UsageError("--resume " + dir + ": no checkpoint in " + dir + "/checkpoints");
  const CheckpointInfo& ck = cks.back();
  TrainState saved = load_checkpoint(ck, *s_, cfg_);
  if (saved.batches_done > 0 && (saved.batch_size != st_.batch_size || saved.train_samples != st_.train_samples))
    throw ConfigError("--resume: " + ck.state() + " was saved in the middle of an epoch with data.batch_size " +
                      std::to_string(saved.batch_size) + " and " + std::to_string(saved.train_samples) +
                      " training samples; the config gives " + std::to_string(st_.batch_size) + " and " +
                      std::to_string(st_.train_samples) + ": resume with the same data and batch size");
  if (saved.seed != st_.seed)
    spdlog::warn("--resume: the checkpoint was trained with seed {}, the config says {}: shuffles and dropout "
                 "masks of the remaining epochs follow the new seed", saved.seed, st_.seed);
  const auto keep = st_;
  st_ = saved;
  st_.optimizer = keep.optimizer;
  st_.seed = keep.seed;
  st_.batch_size = keep.batch_size;
  st_.train_samples = keep.train_samples;
  t_ = st_.step;
  sched_->restore(st_.schedule);
  es_->restore(st_.early_stopping);
  best_.restore(st_.best);
  run_ = std::make_unique<RunDir>(dir, true);
  run_->truncate_metrics(st_.epochs_done);
  run_->event({{"event", "resume"}, {"checkpoint", ck.weights()}, {"epochs_done", st_.epochs_done},
               {"batches_done", st_.batches_done}, {"step", st_.step}, {"epochs", cfg_.epochs}});
  spdlog::info("resuming from {} (epoch {}{}, step {})", ck.weights(), st_.epochs_done + (st_.batches_done ? 1 : 0),
               st_.batches_done ? ", batch " + std::to_string(st_.batches_done) : "", st_.step);
  // restore_best needs the best weights: checkpoints/best.safetensors when it is of that epoch.
  if (es_->enabled() && cfg_.early_stopping.restore_best && es_->best_epoch() > 0 && !es_->stopped()) {
    const std::string path = run_->checkpoints() + "/best.safetensors";
    try {
      if (es_->best_epoch() == st_.epochs_done && st_.batches_done == 0) {
        es_best_ = download_weights(*s_);
      } else if (std::filesystem::exists(path) && weights_epoch(path) == es_->best_epoch()) {
        es_best_ = load_weights(path, *s_->model, "best weights");
      } else {
        spdlog::warn("--resume: the weights of early stopping's best epoch {} are not in {}; restore_best will "
                     "restore only a later best", es_->best_epoch(), path);
      }
    } catch (const DataError& e) {
      spdlog::warn("--resume: cannot read the best weights: {}", e.what());
    }
  }
  if (es_->stopped()) {
    status_ = "already_stopped";
    rep_.note("the run stopped early at epoch " + std::to_string(es_->stopped_epoch()) + "; nothing to resume\n");
  } else if (st_.epochs_done >= cfg_.epochs) {
    status_ = "already_complete";
    rep_.note("the run has finished all " + std::to_string(cfg_.epochs) +
              " epochs; raise --epochs to train further\n");
  }
}

void FitRun::fill_state(int64_t epochs_done, int64_t batches_done, const MetricSums& partial) {
  st_.epochs_done = epochs_done;
  st_.batches_done = batches_done;
  st_.step = t_;
  st_.scalars = s_->executor->host_scalars();
  st_.partial = batches_done ? partial : MetricSums{};
  st_.schedule = sched_->state();
  st_.early_stopping = es_->state();
  st_.best = best_.state();
}

CheckpointInfo FitRun::checkpoint() {
  const double seconds = st_.seconds;
  st_.seconds += seconds_since(t_start_);
  CheckpointInfo ck = save_checkpoint(run_->checkpoints(), *s_, st_, YAML::Dump(resolved_));
  st_.seconds = seconds;
  prune_checkpoints(run_->checkpoints(), cfg_.checkpoint.keep_last);
  run_->event({{"event", "checkpoint"}, {"path", ck.weights()}, {"epochs_done", ck.epochs_done},
               {"batches_done", ck.batches_done}, {"step", ck.step}});
  return ck;
}

void FitRun::interrupt(int64_t epoch, int64_t batches_done, const MetricSums& partial) {
  std::string where = "epoch " + std::to_string(epoch) + ", step " + std::to_string(t_);
  if (!run_) throw InterruptedError("interrupted at " + where + " (no run directory: nothing saved)");
  fill_state(epoch - 1, batches_done, partial);
  CheckpointInfo ck = checkpoint();
  run_->event({{"event", "interrupted"}, {"epoch", epoch}, {"step", t_}, {"checkpoint", ck.weights()}});
  throw InterruptedError("interrupted at " + where + "; checkpoint saved: " + ck.weights() +
                         "; continue with: trainer fit " + cfg_.file + " --resume " + run_->path() +
                         " (and the same --set flags)");
}

bool FitRun::run_epoch(int64_t epoch) {
  Executor& ex = *s_->executor;
  const int64_t C = s_->classes, N = train_loader_->batches_per_epoch();
  const bool resumed_here = epoch == st_.epochs_done + 1 && st_.batches_done > 0;
  const int64_t skip = resumed_here ? std::min(st_.batches_done, N) : 0;
  const MetricSums carried = resumed_here ? st_.partial : MetricSums{};
  const auto t0 = Clock::now();
  rep_.epoch_begin(epoch, cfg_.epochs, N, skip);
  ex.reset_metrics();
  train_loader_->start_epoch(epoch - 1);
  const float* x;
  const int32_t* y;
  int64_t rows, done = 0;
  while (done < skip && train_loader_->next(&x, &y, &rows)) ++done;  // batches trained before the resume
  bool interrupted = false;
  while (done < N && train_loader_->next(&x, &y, &rows)) {
    const double lr = sched_->lr_at(t_ + 1);
    ex.train_step(rows, x, y, ++t_, float(lr));
    ++done;
    if (rep_.wants_refresh(done))
      rep_.refresh(done, compute_metrics(merge_sums(carried, ex.read_metrics()), cfg_.metrics, C));
    if (stop_now()) {
      interrupted = true;
      break;
    }
  }
  const MetricSums train_sums = merge_sums(carried, ex.read_metrics());
  if (interrupted) interrupt(epoch, done, train_sums);
  const double train_seconds = seconds_since(t0);
  const auto train_m = compute_metrics(train_sums, cfg_.metrics, C);
  MetricList val_m;
  if (data_.has_val) {
    bool complete = true;
    last_val_ = evaluate_pass(ex, *val_loader_, [this] { return stop_now(); }, &complete);
    if (!complete) interrupt(epoch, N, train_sums);
    val_m = compute_metrics(last_val_, cfg_.metrics, C);
  }
  const double seconds = seconds_since(t0);
  const double loss = train_m.front().second;
  if (!std::isfinite(loss))
    throw RuntimeError("the training loss became " + std::to_string(loss) + " at epoch " + std::to_string(epoch) +
                       "; lower optimizer.lr" + (cfg_.clip_grad_norm > 0 ? "" : " (or set clip_grad_norm)") +
                       " or check the data normalization");
  const double lr = sched_->lr_at(std::max<int64_t>(t_, 1));

  // Records: the epoch line, the JSON object (stdout in json mode, events.jsonl), metrics.csv.
  const EpochRecord rec = epoch_record(epoch, cfg_.epochs, t_, train_m, val_m, lr, !sched_->is_constant(), seconds,
                                       1000.0 * train_seconds / double(std::max<int64_t>(done - skip, 1)));
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
    if (result_.final_val_accuracy > result_.best_val_accuracy) result_.best_val_accuracy = result_.final_val_accuracy;
  }

  // Callbacks: best weights, early stopping, the plateau schedule.
  if (best_.update(epoch, train_m, val_m) && run_ && cfg_.checkpoint.best != "none") {
    save_weights(run_->checkpoints() + "/best.safetensors", *s_->model, download_weights(*s_),
                 {{"epoch", std::to_string(epoch)}, {"monitor", best_.monitor()}, {"value", std::to_string(best_.best())}});
    run_->event({{"event", "best"}, {"epoch", epoch}, {"monitor", best_.monitor()}, {"value", best_.best()}});
  }
  bool improved = false;
  const bool stop = es_->on_epoch_end(epoch, train_m, val_m, &improved);
  if (improved && cfg_.early_stopping.restore_best) es_best_ = download_weights(*s_);
  if (sched_->on_epoch_end(train_m, val_m)) {
    char msg[160];
    std::snprintf(msg, sizeof msg, "reduce_on_plateau: %s has not improved for %lld epochs; lr is now %.4g\n",
                  cfg_.schedule.monitor.c_str(), (long long)cfg_.schedule.patience + 1, sched_->lr_at(t_ + 1));
    rep_.note(msg);
    if (run_) run_->event({{"event", "lr_reduced"}, {"epoch", epoch}, {"lr", sched_->lr_at(t_ + 1)}});
  }
  fill_state(epoch, 0, {});
  const int64_t every = cfg_.checkpoint.every;
  if (run_ && (epoch == cfg_.epochs || stop || (every > 0 && epoch % every == 0))) checkpoint();
  if (stop) {
    status_ = "early_stopped";
    rep_.note("early stopping at epoch " + std::to_string(epoch) + ": " + cfg_.early_stopping.monitor +
              " has not improved for " + std::to_string(cfg_.early_stopping.patience) + " epochs (best epoch " +
              std::to_string(es_->best_epoch()) + ")\n");
    if (run_) run_->event({{"event", "early_stop"}, {"epoch", epoch}, {"best_epoch", es_->best_epoch()}});
  }
  if (stop_requested() && !stop && epoch < cfg_.epochs) interrupt(epoch + 1, 0, {});  // arrived after the last step
  return !stop;
}

FitResult FitRun::finish() {
  const int64_t C = s_->classes;
  std::string report_title = "validation report (last epoch)";
  if (es_->stopped() && cfg_.early_stopping.restore_best && !es_best_.params.empty()) {
    upload_weights(*s_, es_best_);
    report_title = "validation report (restored best epoch " + std::to_string(es_->best_epoch()) + ")";
    rep_.note("restored the weights of epoch " + std::to_string(es_->best_epoch()) + "\n");
    if (data_.has_val) last_val_ = evaluate_pass(*s_->executor, *val_loader_);
  }
  result_.epochs_run = int(st_.epochs_done);
  result_.steps = t_;
  result_.stopped_early = es_->stopped();
  result_.monitor = best_.monitor();
  result_.best_value = best_.best();
  result_.best_epoch = int(best_.best_epoch());
  result_.seconds = st_.seconds + seconds_since(t_start_);
  result_.peak_bytes = s_->backend->allocator().peak_bytes();
  if (data_.has_val && last_val_.samples > 0)
    rep_.note(report_title + ":\n" + format_class_report(last_val_, C));
  if (run_) {
    result_.run_dir = run_->path();
    result_.final_weights = run_->path() + "/model.safetensors";
    // A resume with nothing left to train keeps the final weights it finds (restored best ones).
    if (status_.rfind("already", 0) != 0 || !std::filesystem::exists(result_.final_weights))
      save_weights(result_.final_weights, *s_->model, download_weights(*s_),
                   {{"epoch", std::to_string(st_.epochs_done)}, {"step", std::to_string(t_)},
                    {"trainer.config", YAML::Dump(resolved_)}});
  }
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  Json sum{{"event", "summary"}, {"status", status_}, {"epochs_run", result_.epochs_run},
                     {"epochs", cfg_.epochs}, {"steps", t_}, {"monitor", result_.monitor},
                     {"best_epoch", result_.best_epoch}, {"best_value", number_or_null(result_.best_value)},
                     {"final_lr", result_.final_lr}, {"seconds", result_.seconds}, {"params", result_.params},
                     {"peak_bytes", result_.peak_bytes}, {"peak_host_rss_bytes", int64_t(ru.ru_maxrss) * 1024},
                     {"device", s_->backend->description()}};
  if (data_.has_val) sum["best_val_accuracy"] = number_or_null(result_.best_val_accuracy);
  if (clipper_) sum["clipped_steps"] = clipper_->clipped_steps();
  if (run_) {
    sum["run_dir"] = run_->path();
    sum["weights"] = result_.final_weights;
  }
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

FitResult fit(const Config& cfg, const FitOptions& opt, std::ostream& out) { return FitRun(cfg, opt, out).run(); }

}  // namespace trainer
