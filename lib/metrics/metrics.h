// Metric values from the sums the executor accumulates on the device (loss sum, top-k hits and
// the confusion matrix), so the step never synchronizes for metrics.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "lib/config/config.h"
#include "lib/model/executor.h"

namespace trainer {

// (name, value) in config order, loss first: {"loss", 0.42}, {"accuracy", 0.85}, ...
std::vector<std::pair<std::string, double>> compute_metrics(const MetricSums& s,
                                                            const std::vector<MetricSpec>& specs,
                                                            int64_t classes);

// Per-class precision, recall, F1 and support; then the confusion matrix.
std::string format_class_report(const MetricSums& s, int64_t classes);

// The top-k values the executor must accumulate for these metrics.
std::vector<int64_t> topk_needed(const std::vector<MetricSpec>& specs);

}  // namespace trainer
