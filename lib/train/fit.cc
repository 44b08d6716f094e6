#include "lib/train/fit.h"

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>

#include "datasets/batch_loader.h"
#include "datasets/split.h"
#include "lib/config/node_reader.h"
#include "lib/core/error.h"
#include "lib/metrics/metrics.h"
#include "lib/model/executor.h"
#include "lib/train/data_sources.h"

namespace trainer {

static std::atomic<bool> g_stop{false};
void request_stop() { g_stop = true; }
bool stop_requested() { return g_stop.load(); }

std::string timestamp_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

namespace {

using Clock = std::chrono::steady_clock;

Normalization normalization_for(const Config& cfg, const Dataset& d) {
  Normalization n;
  n.scale = float(cfg.data.scale_given ? cfg.data.normalize.scale
                                       : (d.dtype == SampleDtype::u8 ? 1.0 / 255.0 : 1.0));
  for (double m : cfg.data.normalize.mean) n.mean.push_back(float(m));
  for (double s : cfg.data.normalize.std) n.std.push_back(float(s));
  return n;
}

std::string format_metrics(const std::vector<std::pair<std::string, double>>& m, const std::string& prefix) {
  std::string s;
  char buf[96];
  for (const auto& kv : m) {
    std::snprintf(buf, sizeof buf, " %s%s=%.4f", prefix.c_str(), kv.first.c_str(), kv.second);
    s += buf;
  }
  return s;
}

double value_of(const std::vector<std::pair<std::string, double>>& m, const std::string& key) {
  for (const auto& kv : m)
    if (kv.first == key) return kv.second;
  return -1;
}

// Runs one pass of evaluation over `loader`; the executor's metric sums hold the result.
MetricSums evaluate(Executor& ex, BatchLoader& loader) {
  ex.reset_metrics();
  loader.start_epoch(0);
  const float* x;
  const int32_t* y;
  int64_t rows;
  while (loader.next(&x, &y, &rows)) ex.eval_step(rows, x, y);
  return ex.read_metrics();
}

}  // namespace

FitResult fit(const Config& cfg, const FitOptions& opt, std::ostream& out) {
  const auto t_start = Clock::now();
  // 1. Everything that can be wrong with the config or the data fails here, before any step.
  Model model(cfg.input_shape, cfg.layers, cfg.init, cfg.file);
  const int C = int(cfg.data.num_classes);
  if (model.output_shape() != Shape{C})
    throw ConfigError("the model's output shape " + model.output_shape().batched_str() +
                      " does not match data.num_classes = " + std::to_string(C) +
                      " (the last layer must produce one value per class)");
  Dataset train = load_source(cfg.data.train, "data.train", cfg.file, C, cfg.input_shape);
  Dataset val;
  bool has_val = false;
  if (present(cfg.data.validation)) {
    val = load_source(cfg.data.validation, "data.validation", cfg.file, C, cfg.input_shape);
    has_val = true;
  } else if (cfg.data.validation_split > 0) {
    auto parts = split_validation(train, cfg.data.validation_split);
    train = std::move(parts.first);
    val = std::move(parts.second);
    has_val = true;
  }
  const int64_t B = cfg.data.batch_size;
  BatchLoader train_loader(train, B, cfg.data.shuffle, cfg.data.drop_last,
                           normalization_for(cfg, train), cfg.seed);
  std::unique_ptr<BatchLoader> val_loader;
  if (has_val)
    val_loader = std::make_unique<BatchLoader>(val, B, false, false, normalization_for(cfg, val), cfg.seed);

  // 2. Backend, plans and memory: all sized and allocated before the first step.
  std::string note;
  DeviceRequest req = opt.device;
  std::unique_ptr<Backend> backend = create_backend(req, &note);
  if (!note.empty()) spdlog::warn("{}", note);
  Optimizer optimizer(cfg.optimizer);
  ExecutorOptions eo;
  eo.batch_sizes = {std::min(B, train.size())};
  if (!cfg.data.drop_last && train.size() % B && train.size() > B) eo.batch_sizes.push_back(train.size() % B);
  if (has_val) {
    eo.batch_sizes.push_back(std::min(B, val.size()));
    if (val.size() % B && val.size() > B) eo.batch_sizes.push_back(val.size() % B);
  }
  eo.num_classes = C;
  eo.loss = cfg.loss;
  eo.top_k = topk_needed(cfg.metrics);
  eo.math = req.math;
  eo.deterministic = req.deterministic;
  eo.seed = cfg.seed;
  Executor ex(model, *backend, optimizer, eo);
  {
    std::vector<float> params(size_t(model.param_arena_floats())), buffers(size_t(model.buffer_arena_floats()));
    model.initialize(params.data(), buffers.data(), cfg.seed);
    ex.upload_params(params.data(), buffers.data());
  }
  spdlog::info("device: {}", backend->description());
  spdlog::info("model: {} layers, {} parameters; train {} samples{}", model.layers().size(),
               model.num_params(), train.size(),
               has_val ? ", validation " + std::to_string(val.size()) + " samples" : "");
  spdlog::info("memory reserved before the first step: {}", format_bytes(ex.planned_bytes()));

  // 3. Run directory: the resolved config and per-epoch metrics.
  std::ofstream csv;
  if (!opt.out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(opt.out_dir, ec);
    if (ec) throw RuntimeError("--out " + opt.out_dir + ": cannot create the directory: " + ec.message());
    YAML::Node resolved = cfg.resolved;
    resolved["model"]["layers"] = model.describe_layers();
    std::ofstream(opt.out_dir + "/config.yaml") << YAML::Dump(resolved) << "\n";
    csv.open(opt.out_dir + "/metrics.csv");
    if (!csv) throw RuntimeError("--out " + opt.out_dir + ": cannot write metrics.csv");
  }

  // 4. The loop.
  FitResult result;
  result.params = model.num_params();
  int64_t t = 0;
  const float lr = float(cfg.optimizer.lr);
  MetricSums last_val;
  for (int64_t epoch = 1; epoch <= cfg.epochs; ++epoch) {
    const auto t0 = Clock::now();
    ex.reset_metrics();
    train_loader.start_epoch(epoch - 1);
    const float* x;
    const int32_t* y;
    int64_t rows, steps = 0;
    while (train_loader.next(&x, &y, &rows)) {
      ex.train_step(rows, x, y, ++t, lr);
      ++steps;
      if (stop_requested()) throw InterruptedError("interrupted at epoch " + std::to_string(epoch) +
                                                   ", step " + std::to_string(steps));
    }
    const auto train_metrics = compute_metrics(ex.read_metrics(), cfg.metrics, C);
    const double train_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<std::pair<std::string, double>> val_metrics;
    if (has_val) {
      last_val = evaluate(ex, *val_loader);
      val_metrics = compute_metrics(last_val, cfg.metrics, C);
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    const double loss = value_of(train_metrics, "loss");
    if (!std::isfinite(loss))
      throw RuntimeError("the training loss became " + std::to_string(loss) + " at epoch " +
                         std::to_string(epoch) + "; lower optimizer.lr or check the data normalization");
    char timing[96];
    std::snprintf(timing, sizeof timing, " time=%.2fs (%.1f ms/step)", seconds,
                  1000.0 * train_seconds / double(std::max<int64_t>(steps, 1)));
    out << "[" << timestamp_now() << "] epoch " << epoch << "/" << cfg.epochs
        << format_metrics(train_metrics, "") << format_metrics(val_metrics, "val_") << timing << std::endl;

    result.epochs_run = int(epoch);
    result.final_train_loss = loss;
    result.final_train_accuracy = value_of(train_metrics, "accuracy");
    if (has_val) {
      result.final_val_loss = value_of(val_metrics, "loss");
      result.final_val_accuracy = value_of(val_metrics, "accuracy");
      if (result.final_val_accuracy > result.best_val_accuracy) {
        result.best_val_accuracy = result.final_val_accuracy;
        result.best_epoch = int(epoch);
      }
    }
    if (csv.is_open()) {
      if (epoch == 1) {
        csv << "epoch";
        for (const auto& kv : train_metrics) csv << "," << kv.first;
        for (const auto& kv : val_metrics) csv << ",val_" << kv.first;
        csv << ",lr,seconds\n";
      }
      csv << epoch;
      for (const auto& kv : train_metrics) csv << "," << kv.second;
      for (const auto& kv : val_metrics) csv << "," << kv.second;
      csv << "," << lr << "," << seconds << "\n" << std::flush;
    }
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - t_start).count();
  result.peak_bytes = backend->allocator().peak_bytes();
  if (has_val) out << "validation report (last epoch):\n" << format_class_report(last_val, C);
  char summary[256];
  if (has_val)
    std::snprintf(summary, sizeof summary, "best val_accuracy=%.4f (epoch %d) total=%.1fs params=%lld peak_memory=%s",
                  result.best_val_accuracy, result.best_epoch, result.seconds, (long long)result.params,
                  format_bytes(result.peak_bytes).c_str());
  else
    std::snprintf(summary, sizeof summary, "final loss=%.4f total=%.1fs params=%lld peak_memory=%s",
                  result.final_train_loss, result.seconds, (long long)result.params,
                  format_bytes(result.peak_bytes).c_str());
  out << "[" << timestamp_now() << "] done: " << summary << std::endl;
  if (!opt.out_dir.empty()) {
    nlohmann::json j{{"epochs", result.epochs_run}, {"best_epoch", result.best_epoch},
                     {"best_val_accuracy", result.best_val_accuracy}, {"seconds", result.seconds},
                     {"params", result.params}, {"peak_bytes", result.peak_bytes},
                     {"device", backend->description()}};
    std::ofstream(opt.out_dir + "/summary.json") << j.dump(2) << "\n";
  }
  return result;
}

}  // namespace trainer
