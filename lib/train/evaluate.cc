#include "lib/train/evaluate.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "datasets/csv_reader.h"
#include "datasets/file_bytes.h"
#include "datasets/npy_reader.h"
#include "lib/checkpoint/atomic_file.h"
#include "lib/config/node_reader.h"
#include "lib/core/error.h"
#include "lib/metrics/metrics.h"
#include "lib/train/checkpointing.h"
#include "lib/train/fit.h"
#include "lib/train/session.h"

namespace trainer {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Rows of numbers (RFC 4180, datasets/csv_records.h); a first row with any cell that is not a
// number is a header and skipped.
Dataset read_feature_csv(const std::string& path, const Shape& input) {
  CsvOptions o;
  o.has_label = false;
  o.detect_header = true;
  Dataset d = read_csv(path, o);
  const int64_t F = input.numel(), found = d.sample_shape.numel();
  if (found != F)
    throw DataError(path + ": " + std::to_string(found) + " values per row; the model takes " +
                    std::to_string(F) + " features per sample (model.input_shape " + input.str() + ")" +
                    (found == F + 1 ? ": remove the label column" : ""));
  d.sample_shape = input;
  return d;
}

Dataset read_inputs(const std::string& path, const Shape& input) {
  if (ends_with(path, ".csv") || ends_with(path, ".csv.gz")) return read_feature_csv(path, input);
  if (!ends_with(path, ".npy") && !ends_with(path, ".npy.gz"))
    throw UsageError("--input " + path + ": expected a .npy or .csv file");
  NpyArray a = read_npy(path);
  if (a.shape.empty() || a.shape[0] == 0)
    throw DataError(path + ": expected an array of shape (N, ...) with N > 0");
  const int64_t n = a.shape[0];
  if (a.numel() / n != input.numel())
    throw DataError(path + " has shape " + Shape(a.shape).str() + " but the model takes samples of shape " +
                    input.str() + " (" + std::to_string(input.numel()) + " values each)");
  Dataset d;
  d.name = path;
  d.sample_shape = input;
  d.labels.assign(size_t(n), 0);
  if (!a.u8.empty()) {
    d.dtype = SampleDtype::u8;
    d.u8 = std::move(a.u8);
  } else {
    d.dtype = SampleDtype::f32;
    if (!a.f32.empty())
      d.f32 = std::move(a.f32);
    else
      d.f32.assign(a.i64.begin(), a.i64.end());
  }
  return d;
}

// Model outputs -> probabilities, per the loss the model was trained with.
void to_probabilities(LossKind loss, float* row, int64_t C) {
  if (loss == LossKind::cross_entropy_probs) return;
  if (loss == LossKind::nll) {
    for (int64_t c = 0; c < C; ++c) row[c] = std::exp(row[c]);
    return;
  }
  const float mx = *std::max_element(row, row + C);
  double sum = 0;
  for (int64_t c = 0; c < C; ++c) sum += std::exp(double(row[c] - mx));
  for (int64_t c = 0; c < C; ++c) row[c] = float(std::exp(double(row[c] - mx)) / sum);
}

}  // namespace

EvalResult evaluate_weights(const Config& cfg, const EvalOptions& o, std::ostream& out) {
  auto model = make_model(cfg);
  EvalResult r;
  r.weights = resolve_weights(o.weights);
  HostWeights w = load_weights(r.weights, *model, "--weights");
  if (o.split != "validation" && o.split != "train")
    throw UsageError("--split " + o.split + ": allowed: validation, train");
  RunData data = load_run_data(cfg, o.split == "train");
  if (o.split == "validation" && !data.has_val)
    throw ConfigError(cfg.file +
                      ": eval needs validation data: set data.validation (or data.validation_split), "
                      "or evaluate the training data with --split train");
  const Dataset& d = o.split == "train" ? data.train : data.val;
  const std::string source =
      o.split == "train" ? "data.train"
                         : (present(cfg.data.validation) ? "data.validation" : "data.validation_split");
  std::vector<int64_t> sizes;
  add_batch_sizes(sizes, d.size(), cfg.data.batch_size, false);
  auto s = open_session(cfg, o.device, sizes, std::move(model));
  upload_weights(*s, w);
  spdlog::info("device: {}", s->backend->description());
  BatchLoader loader(d, cfg.data.batch_size, false, false, normalization_for(cfg, d), cfg.seed);
  r.sums = evaluate_pass(*s->executor, loader);
  r.samples = r.sums.samples;
  r.metrics = compute_metrics(r.sums, cfg.metrics, s->classes);

  Reporter rep(o.report, out);
  const int64_t C = s->classes;
  Json j{{"event", "eval"}, {"weights", r.weights}, {"data", source}, {"samples", r.samples}};
  for (const auto& kv : r.metrics) j[kv.first] = kv.second;
  std::vector<std::vector<double>> confusion(static_cast<size_t>(C));
  for (int64_t i = 0; i < C; ++i)
    confusion[size_t(i)].assign(r.sums.confusion.begin() + i * C, r.sums.confusion.begin() + (i + 1) * C);
  j["confusion"] = confusion;
  rep.note(format_class_report(r.sums, C));
  rep.summary("[" + timestamp_now() + "] eval " + r.weights + " on " + source + " (" +
                  std::to_string(r.samples) + " samples):" + format_metrics(r.metrics, ""),
              j);
  return r;
}

int64_t predict_file(const Config& cfg, const PredictOptions& o, std::ostream& out) {
  auto model = make_model(cfg);
  const std::string weights = resolve_weights(o.weights);
  HostWeights w = load_weights(weights, *model, "--weights");
  const bool csv_out = ends_with(o.output, ".csv");
  if (!csv_out && !ends_with(o.output, ".npy"))
    throw UsageError("--output " + o.output + ": expected a .npy or .csv file");
  {  // before any work: the file's directory must exist
    const std::filesystem::path dir = std::filesystem::path(o.output).parent_path();
    std::error_code ec;
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
      throw UsageError("--output " + o.output + ": " + dir.string() +
                       (std::filesystem::exists(dir, ec) ? " is not a directory" : " does not exist"));
  }
  Dataset d = read_inputs(o.input, cfg.input_shape);
  const int64_t B = cfg.data.batch_size, N = d.size(), C = cfg.data.num_classes;
  std::vector<int64_t> sizes;
  add_batch_sizes(sizes, N, B, false);
  auto s = open_session(cfg, o.device, sizes, std::move(model));
  upload_weights(*s, w);
  BatchLoader loader(d, B, false, false, normalization_for(cfg, d), cfg.seed);
  loader.start_epoch(0);
  std::vector<float> probs(size_t(N * C));
  const float* x;
  const int32_t* y;
  int64_t rows, at = 0;
  while (loader.next(&x, &y, &rows)) {
    float* dst = probs.data() + at * C;
    s->executor->predict(rows, x, dst);
    for (int64_t i = 0; i < rows; ++i) to_probabilities(cfg.loss, dst + i * C, C);
    at += rows;
  }
  if (csv_out) {
    std::string text;
    for (int64_t c = 0; c < C; ++c) text += (c ? ",class_" : "class_") + std::to_string(c);
    text += "\n";
    char cell[32];
    for (int64_t i = 0; i < N; ++i) {
      for (int64_t c = 0; c < C; ++c) {
        std::snprintf(cell, sizeof cell, c ? ",%.9g" : "%.9g", double(probs[size_t(i * C + c)]));
        text += cell;
      }
      text += "\n";
    }
    write_file_atomic(o.output, text);
  } else {
    write_npy_f32(o.output, {N, C}, probs.data());
  }
  out << "[" << timestamp_now() << "] predicted " << N << " samples of " << o.input << " with " << weights
      << " -> " << o.output << " (" << N << " x " << C << " probabilities)" << std::endl;
  return N;
}

}  // namespace trainer
