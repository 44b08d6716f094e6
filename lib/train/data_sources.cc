#include "lib/train/data_sources.h"

#include "datasets/cifar10_reader.h"
#include "datasets/csv_reader.h"
#include "datasets/disc_generator.h"
#include "datasets/idx_reader.h"
#include "datasets/npy_reader.h"
#include "datasets/random_generator.h"
#include "datasets/sequence_reader.h"
#include "lib/config/key_spec.h"
#include "lib/config/node_reader.h"
#include "lib/core/error.h"
#include "lib/train/csv_source.h"

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
        file_key("npy", "y", "y_train.npy",
                 "targets: (N) class indices, or float values (N) or (N, K) for losses that take values"),
        limit_key()}},
      {"csv", csv_source_keys()},
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
  KeyValues s = read_variant(r, "format", "idx", data_source_keys());
  if (s.string("format") == "csv") check_csv_section(s, section, path, file);
  return s;
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

bool source_discovers_classes(const YAML::Node& section) {
  return section.IsMap() && section["format"] && section["format"].IsScalar() &&
         section["format"].Scalar() == "csv";
}

Dataset load_source(const YAML::Node& section, const std::string& path, const std::string& file,
                    const SourceContext& ctx, YAML::Node* learned) {
  const KeyValues s = read_section(section, path, file);
  const std::string format = s.string("format");
  const int64_t limit = s.has("limit") ? s.integer("limit") : 0;
  const int num_classes = ctx.num_classes;
  if (learned) *learned = YAML::Node(YAML::NodeType::Map);
  if (num_classes == 0 && format != "csv" && ctx.target.kind == TargetKind::class_index)
    throw ConfigError(file + ": data.num_classes is required with " + path + ".format " + format +
                      " (only csv sources discover their classes)");
  Dataset d;
  if (format == "idx") {
    d = read_idx(s.string("images"), s.string("labels"), num_classes, limit);
  } else if (format == "cifar10") {
    d = first_n(read_cifar10(s.strings("files")), limit);
  } else if (format == "npy") {
    d = first_n(dataset_from_npy(s.string("x"), s.string("y"), num_classes, ctx.target), limit);
  } else if (format == "csv") {
    const CsvOptions o = csv_options(s, ctx.learned_from, ctx);
    CsvEncoding e;
    d = first_n(read_csv(s.string("path"), o, &e), limit);
    if (learned && !o.encoding.known) *learned = csv_learned_keys(e, o);
  } else if (format == "sequences") {
    SequenceOptions o;
    o.maxlen = s.integer("maxlen");
    o.pad_pre = s.string("padding") == "pre";
    o.trunc_pre = s.string("truncating") == "pre";
    o.num_classes = num_classes;
    d = first_n(read_sequences(s.string("path"), o), limit);
  } else if (format == "disc") {
    d = make_disc(s.integer("samples"), uint64_t(s.integer("seed")));
  } else {
    d = make_random(s.integer("samples"), ctx.input_shape, num_classes, uint64_t(s.integer("seed")));
  }
  const int C = d.num_classes > 0 ? d.num_classes : num_classes;
  for (int32_t y : d.labels)
    if (y < 0 || y >= C)
      throw DataError(path + ": label " + std::to_string(y) + " is outside [0, " + std::to_string(C) +
                      ") (data.num_classes)");
  if (d.sample_shape.numel() != ctx.input_shape.numel())
    throw DataError(path + ": samples have shape " + d.sample_shape.str() + " but model.input_shape is " +
                    ctx.input_shape.str());
  if (d.size() == 0) throw DataError(path + ": the data source has no samples");
  d.name = path;
  return d;
}

Dataset load_predict_csv(const std::string& input, const YAML::Node& train, const std::string& file,
                         const SourceContext& ctx) {
  CsvOptions o;
  if (source_discovers_classes(train)) {
    const KeyValues s = read_section(train, "data.train", file);
    o = csv_options(s, train, ctx);
    o.labels_optional = true;
    o.learn = false;
  } else {  // features only, an optional header row
    o.label_columns.clear();
    o.detect_header = true;
  }
  Dataset d = read_csv(input, o);
  const int64_t F = ctx.input_shape.numel(), found = d.sample_shape.numel();
  if (found != F)
    throw DataError(input + ": " + std::to_string(found) + " values per row; the model takes " +
                    std::to_string(F) + " features per sample (model.input_shape " + ctx.input_shape.str() +
                    ")" + (found == F + 1 ? ": remove the label column" : ""));
  d.sample_shape = ctx.input_shape;
  return d;
}

void record_learned(YAML::Node data, const YAML::Node& learned, const std::vector<std::string>& class_names,
                    int64_t num_classes) {
  if (learned && learned.IsMap())
    for (const auto& kv : learned) data["train"][kv.first.Scalar()] = YAML::Clone(kv.second);
  const YAML::Node names = data["class_names"];
  if (!class_names.empty() && !(names && names.IsSequence() && names.size() > 0)) {
    data["class_names"] = class_names;
    data["class_names"].SetStyle(YAML::EmitterStyle::Flow);
  }
  if (num_classes > 0) data["num_classes"] = num_classes;
}

}  // namespace trainer
