#include "lib/train/data_sources.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cmath>

#include "datasets/cifar10_reader.h"
#include "datasets/csv_reader.h"
#include "datasets/disc_generator.h"
#include "datasets/idx_reader.h"
#include "datasets/npy_reader.h"
#include "datasets/random_generator.h"
#include "datasets/sequence_reader.h"
#include "lib/config/key_spec.h"
#include "lib/core/error.h"

namespace trainer {
namespace {

// A key naming a file that the format needs.
KeySpec file_key(const std::string& format, const std::string& key, const std::string& example,
                 const std::string& doc) {
  return string_key(key, "", doc)
      .require("is required for format " + format + ", e.g. " + key + ": " + example);
}

KeySpec limit_key() {
  return integer_key("limit", 0, 0, int64_t(1) << 40, "keep the first N samples (0: all)");
}

KeySpecs generated_keys(const std::string& what) {
  return {integer_key("samples", 1000, 1, int64_t(1) << 32, what),
          integer_key("seed", 0, 0, int64_t(1) << 62, "seed of the generator")};
}

}  // namespace

const KeyVariants& data_source_keys() {
  static const KeyVariants formats{
      {"idx",
       {file_key("idx", "images", "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
                 "IDX images, gzipped or raw"),
        file_key("idx", "labels", "/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz",
                 "IDX labels, gzipped or raw"),
        limit_key()}},
      {"cifar10",
       {string_list_key("files", "CIFAR-10 binary batches")
            .require("is required: the CIFAR-10 .bin files, e.g. files: [data_batch_1.bin]"),
        limit_key()}},
      {"npy",
       {file_key("npy", "x", "x_train.npy", "samples, (N, ...)"),
        file_key("npy", "y", "y_train.npy", "labels, (N)"), limit_key()}},
      {"csv",
       {file_key("csv", "path", "train.csv", "one sample per row"),
        bool_key("header", false, "the first row names the columns"),
        string_key("label_column", "-1", "name or index of the label column (-1: last)"),
        char_key("delimiter", ",", "the column separator"), limit_key()}},
      {"sequences",
       {file_key("sequences", "path", "reuters_train.txt", "one sample per line: label, then token ids"),
        integer_key("maxlen", 0, 0, 1 << 24, "pad or truncate to this length (0: the longest)"),
        choice_key("padding", "pre", {"pre", "post"}, "where short sequences are padded"),
        choice_key("truncating", "pre", {"pre", "post"}, "where long sequences are cut"), limit_key()}},
      {"disc", generated_keys("points in [0,1]^2")},
      {"random", generated_keys("normal features of model.input_shape, uniform labels")},
  };
  return formats;
}

namespace {

KeyValues read_section(const YAML::Node& section, const std::string& path, const std::string& file) {
  NodeReader r(section, path, file);
  return read_variant(r, "format", "idx", data_source_keys());
}

Dataset first_n(Dataset d, int64_t limit) {
  if (limit <= 0 || limit >= d.size()) return d;
  const int64_t n = d.sample_numel() * limit;
  if (d.dtype == SampleDtype::u8)
    d.u8.resize(size_t(n));
  else
    d.f32.resize(size_t(n));
  if (d.target_width > 0)
    d.targets.resize(size_t(limit * d.target_width));
  else
    d.labels.resize(size_t(limit));
  return d;
}

}  // namespace

YAML::Node describe_source(const YAML::Node& section, const std::string& path, const std::string& file) {
  return read_section(section, path, file).resolved();
}

void to_value_targets(Dataset& d, const TargetLayout& target, const std::string& path) {
  const int64_t K = target.width;
  if (d.target_width == 0 && K > 1 && !target.binary)
    spdlog::warn(
        "{}: the data has one integer label a sample and the model has {} outputs for a regression loss: "
        "each label becomes a "
        "one-hot row of targets. For classification use loss cross_entropy (or "
        "sparse_categorical_crossentropy)",
        path, K);
  else if (d.target_width == 0 && K > 1)
    spdlog::warn(
        "{}: the data has one integer label a sample for binary_cross_entropy's {} outputs (multi-label): "
        "each "
        "label becomes a one-hot row, one positive a sample. For one class a sample, use loss cross_entropy",
        path, K);
  if (d.target_width == 0) {
    const int64_t n = d.size();
    d.targets.assign(size_t(n * K), 0.f);
    for (int64_t i = 0; i < n; ++i) {
      const int32_t y = d.labels[size_t(i)];
      if (K == 1) {
        d.targets[size_t(i)] = float(y);
      } else if (y < 0 || y >= K) {
        throw DataError(path + ": sample " + std::to_string(i) + " has label " + std::to_string(y) +
                        ", which names none of the model's " + std::to_string(K) +
                        " outputs (a multi-label loss takes a multi-hot row, or one label in [0, " +
                        std::to_string(K) + ") a sample)");
      } else {
        d.targets[size_t(i * K + y)] = 1.f;
      }
    }
    d.labels.clear();
    d.target_width = K;
  }
  if (d.target_width != K)
    throw DataError(path + ": the data has " + std::to_string(d.target_width) +
                    " target values a sample, but the model has " + std::to_string(K) +
                    " outputs (the loss takes one output per target)");
  for (size_t j = 0; j < d.targets.size(); ++j) {
    const float v = d.targets[j];
    const std::string where = path + ": sample " + std::to_string(int64_t(j) / K) +
                              (K > 1 ? ", target " + std::to_string(int64_t(j) % K) : std::string());
    if (!std::isfinite(v)) throw DataError(where + " is " + std::to_string(v) + ": targets must be finite");
    if (target.binary && v != 0.f && v != 1.f)
      throw DataError(where + " is " + std::to_string(v) +
                      ": binary_cross_entropy takes targets of 0 or 1 (a regression target needs mse, mae or "
                      "huber)");
  }
}

Dataset load_source(const YAML::Node& section, const std::string& path, const std::string& file,
                    int num_classes, const Shape& input_shape, const TargetLayout& target) {
  const KeyValues s = read_section(section, path, file);
  const std::string format = s.string("format");
  const int64_t limit = s.has("limit") ? s.integer("limit") : 0;
  // A loss on values takes the readers' integer labels as they are (to_value_targets below):
  // no class range to check them against.
  const int classes = target.kind == TargetKind::values ? (1 << 30) : num_classes;
  Dataset d;
  if (format == "idx") {
    d = read_idx(s.string("images"), s.string("labels"), classes, limit);
  } else if (format == "cifar10") {
    d = first_n(read_cifar10(s.strings("files")), limit);
  } else if (format == "npy") {
    d = first_n(dataset_from_npy(s.string("x"), s.string("y"), classes), limit);
  } else if (format == "csv") {
    CsvOptions o;
    o.has_header = s.boolean("header");
    o.label_column = s.string("label_column");
    o.delimiter = s.string("delimiter")[0];
    o.num_classes = classes;
    d = first_n(read_csv(s.string("path"), o), limit);
  } else if (format == "sequences") {
    SequenceOptions o;
    o.maxlen = s.integer("maxlen");
    o.pad_pre = s.string("padding") == "pre";
    o.trunc_pre = s.string("truncating") == "pre";
    o.num_classes = classes;
    d = first_n(read_sequences(s.string("path"), o), limit);
  } else if (format == "disc" || format == "random") {
    // A generator makes every sample in host memory up front: a count that cannot fit is the
    // config's mistake, said before a container is asked for more than it can hold.
    const int64_t n = s.integer("samples");
    const int64_t per_sample = format == "disc" ? 2 : std::max<int64_t>(input_shape.numel(), 1);
    const double bytes = double(n) * double(per_sample + 1) * 4.0;
    const double host = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
    if (host > 0 && bytes > host)
      throw ConfigError(path + ".samples: " + std::to_string(n) + " generated samples of " +
                        std::to_string(per_sample) + " values need " + std::to_string(int64_t(bytes / 1e9)) +
                        " GB of host memory, more than this machine's " +
                        std::to_string(int64_t(host / 1e9)) + " GB; generate fewer");
  }
  if (format == "disc") {
    d = make_disc(s.integer("samples"), uint64_t(s.integer("seed")));
  } else if (format == "random") {
    d = target.kind == TargetKind::values
            ? make_random_values(s.integer("samples"), input_shape, target.width, target.binary,
                                 uint64_t(s.integer("seed")))
            : make_random(s.integer("samples"), input_shape, num_classes, uint64_t(s.integer("seed")));
  }
  if (target.kind == TargetKind::values) {
    to_value_targets(d, target, path);
    num_classes = 0;  // no class range to check
  }
  for (int32_t y : d.labels)
    if (y < 0 || y >= num_classes)
      throw DataError(path + ": label " + std::to_string(y) + " is outside [0, " +
                      std::to_string(num_classes) + ") (data.num_classes)");
  if (d.sample_shape.numel() != input_shape.numel())
    throw DataError(path + ": samples have shape " + d.sample_shape.str() + " but model.input_shape is " +
                    input_shape.str());
  if (d.size() == 0) throw DataError(path + ": the data source has no samples");
  d.name = path;
  return d;
}

}  // namespace trainer
