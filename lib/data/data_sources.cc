#include "lib/data/data_sources.h"

#include <spdlog/spdlog.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "datasets/csv_reader.h"
#include "datasets/image_loader.h"
#include "lib/core/error.h"
#include "lib/data/csv_source.h"
#include "lib/data/data_formats.h"
#include "lib/data/input_files.h"
#include "lib/keys/key_spec.h"
#include "lib/keys/node_reader.h"
#include "lib/keys/yaml_floats.h"

namespace trainer {

const KeyVariants& data_source_keys() {
  static const KeyVariants formats = [] {
    KeyVariants v;
    for (const DataFormat& f : data_formats()) v.push_back({f.name, f.keys, f.doc});
    return v;
  }();
  return formats;
}

namespace {

KeyValues read_section(const YAML::Node& section, const std::string& path, const std::string& file) {
  NodeReader r(section, path, file);
  KeyValues s = read_variant(r, "format", kDefaultDataFormat, data_source_keys());
  if (s.string("format") == "csv") check_csv_section(s, section, path, file);
  return s;
}

std::string absolute_path(const std::string& p) {
  std::error_code ec;
  const std::filesystem::path a = std::filesystem::absolute(p, ec);
  return ec ? p : a.lexically_normal().string();
}

bool is_image_format(const std::string& format) { return format == "image_folder" || format == "image_list"; }

}  // namespace

bool image_source_options(const YAML::Node& section, const std::string& path, const std::string& file,
                          const Shape& input_shape, ImageLoadOptions* out) {
  const KeyValues s = read_section(section, path, file);
  if (!is_image_format(s.string("format"))) return false;
  *out = image_options(s, path, input_shape);
  return true;
}

YAML::Node describe_source(const YAML::Node& section, const std::string& path, const std::string& file) {
  const KeyValues s = read_section(section, path, file);
  YAML::Node out = YAML::Clone(s.resolved());
  // The keys that name files or folders: the resolved config records them as absolute paths, so
  // that a run directory's config.yaml reads the same data from any directory.
  for (const std::string& key : find_data_format(s.string("format"))->file_keys) {
    YAML::Node v = out[key];
    if (!v || v.IsNull()) continue;
    if (v.IsScalar()) {
      out[key] = absolute_path(v.Scalar());
    } else if (v.IsSequence()) {
      YAML::Node list(YAML::NodeType::Sequence);
      for (const auto& item : v) list.push_back(absolute_path(item.Scalar()));
      out[key] = list;
    }
  }
  return out;
}

std::optional<double> default_scale(const YAML::Node& section, const std::string& path,
                                    const std::string& file) {
  const KeyValues s = read_section(section, path, file);
  return find_data_format(s.string("format"))->scale(s);
}

namespace {

Shape squeezed(const Shape& s) {
  std::vector<int64_t> d;
  for (int64_t v : s.dims)
    if (v != 1) d.push_back(v);
  return Shape(d);
}

// [28, 28, 1], as the config writes a shape.
std::string as_list(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace

std::string channels_first_hint(const Shape& in) {
  if (in.rank() != 3 || in[0] <= 4 || in[1] <= 4) return "";
  if (in[2] != 1 && in[2] != 3 && in[2] != 4) return "";
  return "model.input_shape " + as_list(in.dims) +
         " looks channels-last (height, width, channels); trainer's images are channels-first: "
         "input_shape: " +
         as_list({in[2], in[0], in[1]});
}

std::string sample_shape_mismatch(const Shape& found, const Shape& input, const std::string& nhwc_fix) {
  if (found == input) return "";
  const bool same_count = found.numel() == input.numel();
  // A flat sample (a CSV row, an (N, F) array) or a flat input reshapes in C order; so does an
  // extra axis of 1 ((N, 28, 28) for [1, 28, 28]). Two layouts of one rank do not: that is how
  // (N, 32, 32, 3) images pass for [3, 32, 32] and scramble every pixel.
  if (same_count && found.rank() != input.rank()) {
    const Shape f = squeezed(found), i = squeezed(input);
    if (f.rank() <= 1 || i.rank() <= 1 || f == i) return "";
  }
  std::string m = "samples have shape " + found.str() + " but model.input_shape is " + input.str();
  if (same_count && found.rank() == input.rank()) m += " (the same number of values, in another layout)";
  const std::string hint = channels_first_hint(input);
  if (!hint.empty()) return m + "; " + hint;
  // The rule: the last axis is the input's channels while the first axis is not.
  const bool nhwc = found.rank() == 3 && input.rank() == 3 && found[2] == input[0] && found[0] != input[0];
  if (!nhwc) return m;
  m += ": they look channels-last (height, width, channels), and trainer's images are channels-first";
  if (found[0] == input[1] && found[1] == input[2] && !nhwc_fix.empty()) m += "; " + nhwc_fix;
  return m;
}

void to_value_targets(Dataset& d, const TargetLayout& target, const std::string& path, bool warn) {
  const int64_t K = target.width;
  if (!warn) {
  } else if (d.target_width == 0 && K > 1 && !target.binary)
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

bool source_discovers_classes(const YAML::Node& section) {
  const DataFormat* f = section_format(section);
  return f && f->discovers_classes;
}

namespace {

Dataset read_source(const YAML::Node& section, const std::string& path, const std::string& file,
                    const SourceContext& ctx, YAML::Node* learned);

}  // namespace

Dataset load_source(const YAML::Node& section, const std::string& path, const std::string& file,
                    const SourceContext& ctx, YAML::Node* learned) {
  try {
    return read_source(section, path, file, ctx, learned);
  } catch (const DataError& e) {
    throw DataError(data_error_place(section, path, file, e.what()) + e.what());  // input_files.h
  }
}

namespace {

Dataset read_source(const YAML::Node& section, const std::string& path, const std::string& file,
                    const SourceContext& ctx, YAML::Node* learned) {
  const KeyValues s = read_section(section, path, file);
  const std::string format = s.string("format");
  const int64_t limit = s.has("limit") ? s.integer("limit") : 0;
  int num_classes = ctx.num_classes;
  const Shape& input_shape = ctx.input_shape;
  const TargetLayout& target = ctx.target;
  if (learned) *learned = YAML::Node(YAML::NodeType::Map);
  const DataFormat& f = *find_data_format(format);  // read_section checked the name
  if (num_classes == 0 && !f.discovers_classes && target.kind == TargetKind::class_index)
    throw ConfigError(file + ": data.num_classes is required with " + path + ".format " + format +
                      " (only csv and image folder sources discover their classes)");
  // A loss on values takes the readers' integer labels as they are (to_value_targets below):
  // no class range to check them against.
  const int classes = target.kind == TargetKind::values ? (1 << 30) : num_classes;
  Dataset d = f.read(SourceRead{s, path, ctx, classes, limit, learned});
  if (d.label_positions > 1 && target.kind == TargetKind::values)
    throw ConfigError(file + ": " + path + ".format " + format +
                      " gives a class index (the next token) at every position, and the loss takes float "
                      "targets: use loss cross_entropy");
  if (target.kind == TargetKind::class_index && d.label_positions != target.width)
    throw ConfigError(file + ": " + path + " has " + std::to_string(d.label_positions) +
                      " labels a sample and data.train " + std::to_string(target.width) +
                      ": give data.validation the same format and context as data.train");
  if (target.kind == TargetKind::values) {
    to_value_targets(d, target, path);
    num_classes = 0;  // no class range to check
  }
  // Classes a reader discovered (data.num_classes left out) bound its labels.
  const int C = num_classes > 0 ? num_classes : (target.kind == TargetKind::values ? 0 : d.num_classes);
  for (int32_t y : d.labels)
    if (y < 0 || y >= C)
      throw DataError(path + ": label " + std::to_string(y) + " is outside [0, " + std::to_string(C) +
                      ") (data.num_classes)");
  const bool any_image_size = ctx.any_image_size;
  const bool any_size_image = any_image_size && input_shape.rank() == 3 && d.sample_shape.rank() == 3 &&
                              d.sample_shape[0] == input_shape[0];
  const std::string mismatch =
      any_size_image
          ? std::string()
          : sample_shape_mismatch(
                d.sample_shape, input_shape,
                s.has("layout") ? "add layout: nhwc to " + path + " to transpose them on load" : "");
  if (!mismatch.empty() && d.label_positions > 1) {  // a window of tokens: its length is a key of the source
    const std::string m = path + ".context is " + std::to_string(d.sample_shape.numel()) +
                          " tokens a sample, and model.input_shape is " + input_shape.str() +
                          ": give model.input_shape [" + std::to_string(d.sample_shape.numel()) +
                          "], or the same context";
    throw ConfigError(data_error_place(section, path, file, m) + m);
  }
  if (!mismatch.empty())
    throw DataError(
        path + ": " + mismatch +
        (any_image_size ? " (random_resized_crop takes images of any size, with the same channels)" : ""));
  if (d.size() == 0) throw DataError(path + ": the data source has no samples");
  d.name = path;
  return d;
}

}  // namespace

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
    data["class_names"] = string_sequence(class_names);  // "1.50" stays "1.50" through dump_yaml
    data["class_names"].SetStyle(YAML::EmitterStyle::Flow);
  }
  if (num_classes > 0) data["num_classes"] = num_classes;
}

}  // namespace trainer
