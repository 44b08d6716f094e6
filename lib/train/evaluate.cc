#include "lib/train/evaluate.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "datasets/file_bytes.h"
#include "datasets/image_folder.h"
#include "datasets/image_loader.h"
#include "datasets/npy_reader.h"
#include "lib/core/error.h"
#include "lib/data/data_sources.h"
#include "lib/data/input_files.h"
#include "lib/keys/node_reader.h"
#include "lib/metrics/metrics.h"
#include "lib/train/checkpointing.h"
#include "lib/train/fit.h"
#include "lib/train/predict_output.h"
#include "lib/train/session.h"

namespace trainer {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// How the run's images were read: data.validation's image options, else data.train's. False
// when neither is an image format.
bool run_image_options(const Config& cfg, ImageLoadOptions* o) {
  if (present(cfg.data.validation) &&
      image_source_options(cfg.data.validation, "data.validation", cfg.file, cfg.input_shape, o))
    return true;
  return image_source_options(cfg.data.train, "data.train", cfg.file, cfg.input_shape, o);
}

// An image file, a folder of them or an image list (a .csv with a file column), decoded and sized
// exactly as the run's validation images; `files` gets each sample's path.
Dataset read_image_inputs(const std::string& path, ImageLoadOptions o, std::vector<std::string>* files) {
  const ImageListing listing = list_images_to_predict(path);
  if (!listing.skipped.empty())
    spdlog::warn("--input {}: skipped {} entries that are not images (e.g. {})", path, listing.skipped.size(),
                 listing.skipped.front());
  o.key = "--input";
  Dataset d = load_images(listing, o);
  for (const ImageFile& f : listing.files) files->push_back(f.path);
  d.name = path;
  return d;
}

Dataset read_inputs(const Config& cfg, const std::string& path, std::vector<std::string>* files) {
  const Shape& input = cfg.input_shape;
  ImageLoadOptions image_options;
  if (run_image_options(cfg, &image_options)) return read_image_inputs(path, image_options, files);
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec) || has_image_extension(path))
    throw UsageError(
        "--input " + path +
        ": images are read only for a model trained on images (data.train.format image_folder or "
        "image_list); this config's model takes .npy or .csv inputs");
  // A CSV is read with the training source's column options and learned encoding when that is a
  // CSV too (the label columns may be there or not), else as rows of features.
  if (ends_with(path, ".csv") || ends_with(path, ".csv.gz")) {
    SourceContext ctx;
    ctx.num_classes = int(cfg.data.num_classes);
    ctx.input_shape = input;
    ctx.class_names = cfg.data.class_names;
    ctx.target = target_layout(cfg);
    return load_predict_csv(path, cfg.data.train, cfg.file, ctx);
  }
  if (!ends_with(path, ".npy") && !ends_with(path, ".npy.gz"))
    throw UsageError("--input " + path + ": expected a .npy or .csv file");
  NpyArray a = read_npy(path);
  if (a.shape.empty() || a.shape[0] == 0)
    throw DataError(path + ": expected an array of shape (N, ...) with N > 0");
  const int64_t n = a.shape[0];
  // Shapes, not counts: (N, 32, 32, 3) for [3, 32, 32] has the right count and scrambled pixels.
  const Shape sample(std::vector<int64_t>(a.shape.begin() + 1, a.shape.end()));
  const std::string mismatch = sample_shape_mismatch(
      a.shape.size() == 1 ? Shape{1} : sample, input,
      "transpose them to (N, channels, height, width) first: np.save(path, np.transpose(x, (0, 3, 1, 2)))");
  if (!mismatch.empty())
    throw DataError("--input " + path + ": " + mismatch + " (the model takes " +
                    std::to_string(input.numel()) + " values per sample)");
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
void to_probabilities(ClassScores scores, float* row, int64_t C) {
  if (scores == ClassScores::probabilities) return;
  if (scores == ClassScores::log_probabilities) {
    for (int64_t c = 0; c < C; ++c) row[c] = std::exp(row[c]);
    return;
  }
  const float mx = *std::max_element(row, row + C);
  double sum = 0;
  for (int64_t c = 0; c < C; ++c) sum += std::exp(double(row[c] - mx));
  for (int64_t c = 0; c < C; ++c) row[c] = float(std::exp(double(row[c] - mx)) / sum);
}

}  // namespace

EvalResult evaluate_weights(const Config& config, const EvalOptions& o, std::ostream& out) {
  // Paths first, before the model is built and the data read.
  EvalResult r;
  r.weights = resolve_weights(o.weights);
  if (o.split != "validation" && o.split != "train")
    throw UsageError("--split " + o.split + ": allowed: validation, train");
  check_input_files(config.data.train, config.data.validation, config.file, o.split == "train");
  auto model = make_model(config);
  HostWeights w = load_weights(r.weights, *model, "--weights");
  RunData data = load_run_data(config, o.split == "train");
  const Config cfg = with_data_classes(config, data, *model);
  if (o.split == "validation" && !data.has_val)
    throw ConfigError(cfg.file +
                      ": eval needs validation data: set data.validation (or data.validation_split), "
                      "or evaluate the training data with --split train");
  const Dataset& d = o.split == "train" ? data.train : data.val;
  if (d.sample_shape.numel() != cfg.input_shape.numel())  // training images for random_resized_crop
    throw ConfigError("eval --split " + o.split + ": its images are " + d.sample_shape.str() +
                      " (cropped at random to model.input_shape " + cfg.input_shape.str() +
                      " only in training); evaluate data.validation instead");
  const std::string source =
      o.split == "train" ? "data.train"
                         : (present(cfg.data.validation) ? "data.validation" : "data.validation_split");
  std::vector<int64_t> sizes;
  add_batch_sizes(sizes, d.size(), cfg.data.batch_size, false);
  auto s = open_session(cfg, o.device, sizes, std::move(model));
  upload_weights(*s, w);
  spdlog::info("device: {}", s->backend->description());
  BatchLoader loader(d, cfg.data.batch_size, false, false, normalization_for(cfg, d), cfg.seed, 0, 1,
                     loader_threads_for(cfg, *s, d));
  r.sums = in_target_units(evaluate_pass(*s->executor, loader), data.target_scale);
  r.samples = r.sums.samples;
  const Task task = cfg.loss_config.task(s->classes);
  r.metrics = compute_metrics(r.sums, cfg.metrics, s->classes, task);

  Reporter rep(o.report, out);
  const int64_t C = s->classes;
  Json j{{"event", "eval"}, {"weights", r.weights}, {"data", source}, {"samples", r.samples}};
  for (const auto& kv : r.metrics) j[kv.first] = number_or_null(kv.second);
  if (!cfg.data.class_names.empty()) j["class_names"] = cfg.data.class_names;
  if (task == Task::tokens) {  // no per-class table: a vocabulary's classes are too many
    j["task"] = task_name(task);
    j["tokens"] = r.sums.confusion.size() == 2 ? int64_t(r.sums.confusion[1]) : int64_t(0);
    rep.note(format_class_report(r.sums, C, cfg.data.class_names, task));
    rep.summary("[" + timestamp_now() + "] eval " + r.weights + " on " + source + " (" +
                    std::to_string(r.samples) + " samples):" + format_metrics(r.metrics, ""),
                j);
    return r;
  }
  if (task != Task::classification) {
    j["task"] = task_name(task);
    Json outputs = Json::array();  // per output: regression's errors, or a label's counts and AUC
    for (int64_t k = 0; k < C; ++k) {
      Json item{{"id", k}};
      if (k < int64_t(cfg.data.class_names.size())) item["name"] = cfg.data.class_names[size_t(k)];
      if (task == Task::regression) {
        const RegressionRow row = regression_row(r.sums, k);
        item["mae"] = number_or_null(row.mae);
        item["rmse"] = number_or_null(row.rmse);
        item["r2"] = number_or_null(row.r2);
      } else {
        const double* c = r.sums.confusion.data() + k * kBinarySums;
        item["tp"] = int64_t(c[0]), item["fp"] = int64_t(c[1]), item["fn"] = int64_t(c[2]),
        item["tn"] = int64_t(c[3]);
        std::vector<float> h(c + 4, c + 4 + 2 * kAucBins);
        item["auc"] = number_or_null(histogram_auc(h.data(), h.data() + kAucBins));
      }
      outputs.push_back(item);
    }
    j["outputs"] = outputs;
    rep.note(format_class_report(r.sums, C, cfg.data.class_names, task));
    rep.summary("[" + timestamp_now() + "] eval " + r.weights + " on " + source + " (" +
                    std::to_string(r.samples) + " samples):" + format_metrics(r.metrics, ""),
                j);
    return r;
  }
  // The per-class report (the last row is the macro average) and the confusion matrix as
  // integer counts: rows = true class, columns = predicted class.
  Json classes = Json::array();
  const std::vector<ClassRow> report = class_report(r.sums, C, cfg.data.class_names);
  for (size_t c = 0; c < report.size(); ++c) {
    const ClassRow& row = report[c];
    Json item;
    if (c + 1 < report.size()) item = Json{{"id", int64_t(c)}, {"name", row.name}};
    item["precision"] = number_or_null(row.precision);
    item["recall"] = number_or_null(row.recall);
    item["f1"] = number_or_null(row.f1);
    item["support"] = row.support;
    if (c + 1 == report.size())
      j["macro"] = item;
    else
      classes.push_back(item);
  }
  j["classes"] = classes;
  std::vector<std::vector<int64_t>> confusion(static_cast<size_t>(C));
  for (int64_t i = 0; i < C; ++i)
    for (int64_t k = 0; k < C; ++k)
      confusion[size_t(i)].push_back(int64_t(r.sums.confusion[size_t(i * C + k)]));
  j["confusion"] = confusion;
  rep.note(format_class_report(r.sums, C, cfg.data.class_names));
  rep.summary("[" + timestamp_now() + "] eval " + r.weights + " on " + source + " (" +
                  std::to_string(r.samples) + " samples):" + format_metrics(r.metrics, ""),
              j);
  return r;
}

int64_t predict_file(const Config& cfg, const PredictOptions& o, std::ostream& out) {
  const std::string weights = resolve_weights(o.weights);  // paths before the model is built
  auto model = make_model(cfg);
  HostWeights w = load_weights(weights, *model, "--weights");
  if (cfg.loss_config.positions > 1)
    throw UsageError(cfg.file +
                     ": this model predicts the next token at every position (data format text or tokens): "
                     "sample from it with trainer generate RUN --prompt TEXT");
  const PredictWrite what = parse_predict_write(o.write);
  check_predict_output(o.output, what);  // before any work
  if (cfg.data.num_classes == 0 && !cfg.loss_config.on_values())
    throw ConfigError(
        cfg.file +
        ": data.num_classes is left out (the training data gives the classes): predict with the "
        "run directory (trainer predict RUN), whose config.yaml records them");
  const TargetScale scale = recorded_target_scale(cfg);
  if (normalize_targets(cfg) && !scale.on())
    throw ConfigError(cfg.file +
                      ": data.normalize_targets: the targets' statistics are learned by fit and recorded in "
                      "the run's config.yaml (data.target_statistics): predict with the run directory "
                      "(trainer predict RUN)");
  std::vector<std::string> files;  // image inputs: each sample's file
  Dataset d = read_inputs(cfg, o.input, &files);
  const int64_t B = cfg.data.batch_size, N = d.size(), C = cfg.data.num_classes;
  std::vector<int64_t> sizes;
  add_batch_sizes(sizes, N, B, false);
  auto s = open_session(cfg, o.device, sizes, std::move(model));
  upload_weights(*s, w);
  BatchLoader loader(d, B, false, false, normalization_for(cfg, d), cfg.seed, 0, 1,
                     loader_threads_for(cfg, *s, d));
  loader.start_epoch(0);
  const LossConfig& loss = cfg.loss_config;
  const int64_t K = s->classes;  // the model's outputs: C classes, or K values
  const bool sigmoid = loss.on_values() && loss.formula == ValueLoss::bce_logits;
  std::vector<float> probs(size_t(N * K));
  const float* x;
  const void* y;
  int64_t rows, at = 0;
  while (loader.next(&x, &y, &rows)) {
    float* dst = probs.data() + at * K;
    s->executor->predict(rows, x, dst);
    if (sigmoid)
      for (int64_t i = 0; i < rows * K; ++i) dst[i] = float(1.0 / (1.0 + std::exp(-double(dst[i]))));
    else if (!loss.on_values())
      for (int64_t i = 0; i < rows; ++i) to_probabilities(loss.scores, dst + i * K, K);
    at += rows;
  }
  if (loss.on_values()) {
    if (scale.on() && int64_t(scale.mean.size()) != K)
      throw ConfigError(cfg.file + ": data.target_statistics has " + std::to_string(scale.mean.size()) +
                        " values per statistic, the model " + std::to_string(K) + " outputs");
    to_target_units(probs.data(), N, scale);  // data.normalize_targets: back to the targets' units
    // A binary model's one output is the positive class, the second of two class names.
    std::vector<std::string> names = cfg.data.class_names;
    if (sigmoid && K == 1 && names.size() == 2) names.erase(names.begin());
    write_value_predictions(o.output, what, probs, N, K, names, sigmoid, files);
    out << "[" << timestamp_now() << "] predicted " << N << " samples of " << o.input << " with " << weights
        << " -> " << o.output << " (" << N << " x " << K << (sigmoid ? " probabilities" : " values")
        << (sigmoid && what != PredictWrite::probabilities ? " and decisions" : "") << ")" << std::endl;
    return N;
  }
  write_predictions(o.output, what, probs, N, C, cfg.data.class_names, files);
  out << "[" << timestamp_now() << "] predicted " << N << " samples of " << o.input << " with " << weights
      << " -> " << o.output << " ("
      << (what == PredictWrite::arg_max ? std::to_string(N) + " classes"
                                        : std::to_string(N) + " x " + std::to_string(C) + " probabilities" +
                                              (what == PredictWrite::both ? " and classes" : ""))
      << ")" << std::endl;
  return N;
}

}  // namespace trainer
