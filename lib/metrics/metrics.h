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

// One row of the per-class report; the last row of class_report() is the macro average, with the
// sample count as its support.
struct ClassRow {
  std::string name;  // the class name (data.class_names), or its id; "macro" for the average
  double precision = 0, recall = 0, f1 = 0;
  int64_t support = 0;
};
std::vector<ClassRow> class_report(const MetricSums& s, int64_t classes,
                                   const std::vector<std::string>& names);

// Per-class precision, recall, F1 and support; then the confusion matrix, its rows headed by
// "id name" and its columns by class ids. names: data.class_names, or empty for ids alone.
std::string format_class_report(const MetricSums& s, int64_t classes,
                                const std::vector<std::string>& names = {});

// The top-k values the executor must accumulate for these metrics.
std::vector<int64_t> topk_needed(const std::vector<MetricSpec>& specs);

}  // namespace trainer
