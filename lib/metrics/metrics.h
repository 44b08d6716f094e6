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
// task: the loss's (lib/losses); for the losses on values `classes` is the model's outputs and
// s.confusion holds the loss's metric sums (lib/core/value_loss_formula.h).
std::vector<std::pair<std::string, double>> compute_metrics(const MetricSums& s,
                                                            const std::vector<MetricSpec>& specs,
                                                            int64_t classes,
                                                            Task task = Task::classification);

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
// Regression: MAE, RMSE and R^2 per output; binary and multi-label: precision, recall, F1, support
// and ROC AUC per label, then the micro and macro averages.
std::string format_class_report(const MetricSums& s, int64_t classes,
                                const std::vector<std::string>& names = {}, Task task = Task::classification);

// One label's ROC AUC from its score histograms (kAucBins positives' counts, then negatives'):
// the chance that a positive scores above a negative, ties within a bin counted half; NaN without
// positives or negatives.
double histogram_auc(const float* positives, const float* negatives);

// Per output of a regression: mean absolute error, root mean squared error, R^2 (1 - SSE/SST; 0
// when the targets do not vary).
struct RegressionRow {
  double mae = 0, rmse = 0, r2 = 0;
};
RegressionRow regression_row(const MetricSums& s, int64_t output);

// The top-k values the executor must accumulate for these metrics.
std::vector<int64_t> topk_needed(const std::vector<MetricSpec>& specs);

}  // namespace trainer
