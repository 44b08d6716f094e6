// eval and predict: a config's model with weights from a safetensors file.
//
//   evaluate_weights  metrics (loss and the config's metrics) on the validation data (or the
//                     training data) plus the per-class report and confusion matrix.
//   predict_file      class probabilities and/or the arg-max class for every sample of an .npy
//                     or .csv file (lib/train/predict_output.h says what is written).
// Inputs are normalized exactly like training samples of the same dtype (data.normalize; uint8
// arrays are scaled by 1/255 unless data.normalize.scale is set). Probabilities: softmax of the
// outputs for cross-entropy from logits, exp of the outputs for nll (log-probabilities), the
// outputs themselves for cross-entropy from probabilities.
#pragma once

#include <ostream>
#include <string>

#include "lib/backend/backend_registry.h"
#include "lib/config/config.h"
#include "lib/model/executor.h"
#include "lib/train/progress.h"

namespace trainer {

struct EvalOptions {
  DeviceRequest device;
  std::string weights;               // a .safetensors file or a run directory
  std::string split = "validation";  // validation | train
  ReportOptions report;              // format and quiet are used
};

struct EvalResult {
  std::vector<std::pair<std::string, double>> metrics;
  MetricSums sums;
  std::string weights;  // the file actually read
  int64_t samples = 0;
};

EvalResult evaluate_weights(const Config& cfg, const EvalOptions& o, std::ostream& out);

struct PredictOptions {
  DeviceRequest device;
  std::string weights, input, output;
  std::string write = "probabilities";  // probabilities | class | both (lib/train/predict_output.h)
};

// Returns the number of samples written.
int64_t predict_file(const Config& cfg, const PredictOptions& o, std::ostream& out);

}  // namespace trainer
