#include "lib/train/target_scale.h"

#include <algorithm>
#include <cmath>

#include "lib/core/error.h"
#include "lib/core/value_loss_formula.h"

namespace trainer {

bool normalize_targets(const Config& cfg) {
  const YAML::Node n = cfg.resolved["data"]["normalize_targets"];
  return n && n.IsScalar() && n.as<bool>();
}

TargetScale recorded_target_scale(const Config& cfg) {
  TargetScale t;
  const YAML::Node s = cfg.resolved["data"]["target_statistics"];
  if (!normalize_targets(cfg) || !s || !s.IsMap()) return t;
  t.mean = s["mean"].as<std::vector<double>>();
  t.std = s["std"].as<std::vector<double>>();
  return t;
}

TargetScale target_statistics(const Dataset& d) {
  const int64_t K = d.target_width, N = d.size();
  TargetScale t;
  t.mean.assign(size_t(K), 0.0);
  t.std.assign(size_t(K), 1.0);
  if (K == 0 || N == 0) return t;
  // Two passes in double: the mean, then the squared deviations (no cancellation).
  for (int64_t i = 0; i < N; ++i)
    for (int64_t k = 0; k < K; ++k) t.mean[size_t(k)] += double(d.targets[size_t(i * K + k)]);
  for (double& m : t.mean) m /= double(N);
  std::vector<double> sq(size_t(K), 0.0);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t k = 0; k < K; ++k) {
      const double e = double(d.targets[size_t(i * K + k)]) - t.mean[size_t(k)];
      sq[size_t(k)] += e * e;
    }
  for (int64_t k = 0; k < K; ++k) {
    const double sd = std::sqrt(sq[size_t(k)] / double(N));
    // A target that does not vary (or barely, against its size) is only centred.
    t.std[size_t(k)] = sd > 1e-12 * std::max(1.0, std::fabs(t.mean[size_t(k)])) ? sd : 1.0;
  }
  return t;
}

void standardize_targets(Dataset& d, const TargetScale& t, const std::string& what) {
  const int64_t K = d.target_width;
  if (K != int64_t(t.mean.size()))
    throw ConfigError(what + ": its samples have " + std::to_string(K) +
                      " target values, data.target_statistics has " + std::to_string(t.mean.size()) +
                      " (one per model output): were they recorded for another model?");
  const int64_t N = d.size();
  for (int64_t i = 0; i < N; ++i)
    for (int64_t k = 0; k < K; ++k) {
      float& y = d.targets[size_t(i * K + k)];
      y = float((double(y) - t.mean[size_t(k)]) / t.std[size_t(k)]);
    }
}

MetricSums in_target_units(MetricSums s, const TargetScale& t) {
  if (!t.on()) return s;
  const double n = double(s.samples);
  for (size_t k = 0; k < t.mean.size() && (k + 1) * kRegressionSums <= s.confusion.size(); ++k) {
    double* c = s.confusion.data() + k * kRegressionSums;
    const double m = t.mean[k], sd = t.std[k];
    const double abs_e = c[0], sq_e = c[1], sum_y = c[2], sum_y2 = c[3];
    // e = sd e', y = sd y' + m
    c[0] = sd * abs_e;
    c[1] = sd * sd * sq_e;
    c[2] = sd * sum_y + n * m;
    c[3] = sd * sd * sum_y2 + 2 * m * sd * sum_y + n * m * m;
  }
  return s;
}

void to_target_units(float* values, int64_t rows, const TargetScale& t) {
  if (!t.on()) return;
  const size_t K = t.mean.size();
  for (int64_t i = 0; i < rows; ++i)
    for (size_t k = 0; k < K; ++k) {
      float& v = values[size_t(i) * K + k];
      v = float(double(v) * t.std[k] + t.mean[k]);
    }
}

YAML::Node target_statistics_node(const TargetScale& t) {
  YAML::Node n(YAML::NodeType::Map);
  n["mean"] = t.mean;
  n["std"] = t.std;
  n["mean"].SetStyle(YAML::EmitterStyle::Flow);
  n["std"].SetStyle(YAML::EmitterStyle::Flow);
  return n;
}

}  // namespace trainer
