#include "lib/export/onnx_inputs.h"

#include <cstdio>

#include "lib/core/error.h"

namespace trainer::onnx {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::vector<double> doubles(const YAML::Node& n) {
  return n && n.IsSequence() ? n.as<std::vector<double>>() : std::vector<double>{};
}

// The reader's learned encoding of a CSV training source, recorded in the run's config.yaml.
std::string add_csv_encoding(GraphBuilder& b, const Config& cfg, std::string x,
                             std::vector<std::string>* notes) {
  const YAML::Node& src = cfg.data.train;
  const int64_t F = cfg.input_shape.numel();
  const bool standardize = src["normalize"] && src["normalize"].Scalar() == "standardize";
  const std::vector<double> fill = doubles(src["missing"] ? src["missing"]["values"] : YAML::Node());
  const bool categorical = src["categories"] && src["categories"].IsMap() && src["categories"].size() > 0;
  if (categorical && (standardize || !fill.empty()))
    throw ConfigError(
        cfg.file +
        ": data.train has categorical columns, which the CSV reader one-hot encodes in place; the "
        "exported graph cannot place their standardize or missing.fill statistics among the "
        "encoded features (export works for CSV sources without categorical columns, or without "
        "normalize: standardize and missing)");
  const auto per_feature = [&](const std::vector<double>& v, const std::string& key) {
    if (int64_t(v.size()) != F)
      throw ConfigError(cfg.file + ": data.train." + key + " holds " + std::to_string(v.size()) +
                        " values; the model takes " + std::to_string(F) + " features");
  };
  if (!fill.empty()) {
    per_feature(fill, "missing.values");
    std::vector<float> f(fill.begin(), fill.end());
    const std::string nan = b.node("IsNaN", {x}, "input.missing");
    x = b.node("Where", {nan, b.floats("input.fill", {F}, f), x}, "input.filled");
    notes->push_back("missing values (NaN) filled per feature with data.train.missing.values");
  }
  if (standardize) {
    const YAML::Node s = src["standardize"];
    if (!s || !s.IsMap())
      throw ConfigError(cfg.file +
                        ": data.train standardizes its features with statistics learned from the training "
                        "data, and this config does not record them: export the run directory that "
                        "`trainer fit` wrote (its config.yaml holds data.train.standardize)");
    const std::vector<double> mean = doubles(s["mean"]), stdv = doubles(s["std"]);
    per_feature(mean, "standardize.mean");
    per_feature(stdv, "standardize.std");
    std::vector<float> m(static_cast<size_t>(F)), inv(static_cast<size_t>(F));
    for (int64_t k = 0; k < F; ++k) {  // the reader's arithmetic: (v - float(mean)) * float(1 / std)
      m[size_t(k)] = float(mean[size_t(k)]);
      inv[size_t(k)] = float(1.0 / stdv[size_t(k)]);
    }
    const std::string centred =
        b.node("Sub", {x, b.floats("input.standardize.mean", {F}, m)}, "input.centred");
    x = b.node("Mul", {centred, b.floats("input.standardize.inv_std", {F}, inv)}, "input.standardized");
    notes->push_back(
        "CSV features standardized with data.train.standardize (the training data's mean and std)");
  }
  return x;
}

// data.normalize per channel, as BatchLoader computes it: mul_c = scale / std_c, add_c = -mean_c / std_c
// in float, then x * mul_c + add_c.
std::string add_normalization(GraphBuilder& b, const Config& cfg, std::string x,
                              std::vector<std::string>* notes) {
  const Shape& shape = cfg.input_shape;
  const int64_t C = shape.rank() > 0 ? shape[0] : 1;
  const auto per_channel = [&](const std::vector<double>& v, float fallback, const char* what) {
    if (v.empty()) return std::vector<float>(size_t(C), fallback);
    if (v.size() == 1) return std::vector<float>(size_t(C), float(v[0]));
    if (int64_t(v.size()) != C)
      throw DataError(std::string("normalization ") + what + " has " + std::to_string(v.size()) +
                      " values; expected 1 or " + std::to_string(C) + " (one per channel of sample shape " +
                      shape.str() + ")");
    return std::vector<float>(v.begin(), v.end());
  };
  const std::vector<float> mean = per_channel(cfg.data.normalize.mean, 0.f, "mean");
  const std::vector<float> stdv = per_channel(cfg.data.normalize.std, 1.f, "std");
  const float scale = float(cfg.data.scale_known ? cfg.data.normalize.scale : 1.0);
  if (!cfg.data.scale_known)
    notes->push_back(
        "the run recorded no data.normalize.scale: the graph scales by 1, as predict does a float32 .npy "
        "(predict scales a uint8 .npy by 1/255)");
  std::vector<float> mul(static_cast<size_t>(C)), add(static_cast<size_t>(C));
  bool identity = true;
  for (size_t c = 0; c < size_t(C); ++c) {
    mul[c] = scale / stdv[c];
    add[c] = -mean[c] / stdv[c];
    identity = identity && mul[c] == 1.f && add[c] == 0.f;
  }
  if (identity) return x;
  std::vector<int64_t> dims(shape.rank() > 0 ? shape.rank() : 1, 1);  // (C, 1, 1): per channel
  dims[0] = C;
  const std::string scaled = b.node("Mul", {x, b.floats("input.normalize.mul", dims, mul)}, "input.scaled");
  x = b.node("Add", {scaled, b.floats("input.normalize.add", dims, add)}, "input.normalized");
  std::string what = "data.normalize: x * " + number(scale);
  if (cfg.data.normalize.mean.size() > 1 || cfg.data.normalize.std.size() > 1 ||
      (mean.size() && mean[0] != 0.f) || (stdv.size() && stdv[0] != 1.f))
    what += ", then (x - mean) / std per channel";
  notes->push_back(what);
  return x;
}

}  // namespace

std::string add_input_preprocessing(GraphBuilder& b, const Config& cfg, const std::string& input,
                                    std::vector<std::string>* notes) {
  std::string x = input;
  const YAML::Node& src = cfg.data.train;
  if (src && src.IsMap() && src["format"] && src["format"].Scalar() == "csv")
    x = add_csv_encoding(b, cfg, x, notes);
  return add_normalization(b, cfg, x, notes);
}

}  // namespace trainer::onnx
