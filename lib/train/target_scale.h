// data.normalize_targets: a regression trains on (y - mean) / std per output, with the mean and
// (population) standard deviation of the training rows' targets, as scikit-learn's StandardScaler
// computes them. The run records them (data.target_statistics in its config.yaml) and everything a
// user reads is in the targets' own units again: the metrics (MAE, RMSE, R^2, per output),
// predict's values and the ONNX export's `values` output. The loss alone stays in standardized
// units, as the optimizer sees it.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <vector>

#include "datasets/dataset.h"
#include "lib/config/config.h"
#include "lib/model/step_runner.h"

namespace trainer {

struct TargetScale {
  std::vector<double> mean, std;  // per output; empty: the targets are used as they are
  bool on() const { return !mean.empty(); }
};

// Whether the config asks for it (data.normalize_targets), and the statistics it records
// (data.target_statistics; empty before a run has learned them).
bool normalize_targets(const Config& cfg);
TargetScale recorded_target_scale(const Config& cfg);

// Per output over every sample of `d` (the training rows); a constant target gets std 1, so that
// it is centred and not divided by 0.
TargetScale target_statistics(const Dataset& d);

// y -> (y - mean) / std, in place; the dataset's target width must match.
void standardize_targets(Dataset& d, const TargetScale& t, const std::string& what);

// The regression metric sums of standardized targets (lib/core/value_loss_formula.h: per output
// sum |e|, sum e^2, sum y, sum y^2) as the targets' own units give them; the loss is left as is.
MetricSums in_target_units(MetricSums s, const TargetScale& t);

// Predictions of the standardized model (rows x K) into the targets' units, in place.
void to_target_units(float* values, int64_t rows, const TargetScale& t);

// {mean: [...], std: [...]} for the run's config.yaml.
YAML::Node target_statistics_node(const TargetScale& t);

}  // namespace trainer
