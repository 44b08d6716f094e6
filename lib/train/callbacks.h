// Training controls that run between steps or epochs, on the host:
//
//   BestTracker    the best value of one monitor ("val_accuracy") and its epoch: summary.json
//                  and checkpoints/best.safetensors.
//   EarlyStopping  Keras' EarlyStopping: stop when `monitor` has not improved by more than
//                  min_delta for `patience` epochs; restore_best puts back the weights of the
//                  best epoch when it stops.
//   GradClipper    clip_grad_norm: PyTorch's torch.nn.utils.clip_grad_norm_ over all parameter
//                  tensors: norm = sqrt(sum g^2), and when norm > max_norm every gradient is
//                  multiplied by max_norm / (norm + 1e-6). It runs as the Executor's gradient
//                  hook. Host fallback: the CPU backend's grads are host memory and are scaled in
//                  place; other backends download the arena and upload it when scaled (a
//                  device-side Backend::grad_norm_scale op would avoid the round trip).
// Every state that must survive --resume has state()/restore() as JSON.
#pragma once

#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/backend/backend.h"
#include "lib/config/config.h"
#include "lib/model/model.h"
#include "lib/train/schedules.h"

namespace trainer {

class BestTracker {
 public:
  BestTracker() = default;
  explicit BestTracker(std::string monitor) : monitor_(std::move(monitor)), mode_(default_mode(monitor_)) {}
  bool enabled() const { return !monitor_.empty() && monitor_ != "none"; }
  const std::string& monitor() const { return monitor_; }
  // Records this epoch's value; true when it is a new best.
  bool update(int64_t epoch, const MetricList& train, const MetricList& val);
  double best() const { return best_; }
  int64_t best_epoch() const { return best_epoch_; }
  nlohmann::json state() const;
  void restore(const nlohmann::json& j);

 private:
  std::string monitor_;
  MonitorMode mode_ = MonitorMode::min;
  double best_ = std::numeric_limits<double>::quiet_NaN();
  int64_t best_epoch_ = 0;
};

class EarlyStopping {
 public:
  explicit EarlyStopping(const EarlyStoppingConfig& c) : c_(c) {}
  bool enabled() const { return c_.enabled; }
  const EarlyStoppingConfig& config() const { return c_; }
  // After each epoch. Returns true when training must stop now; *improved tells whether this
  // epoch is the new best (the caller keeps its weights for restore_best).
  bool on_epoch_end(int64_t epoch, const MetricList& train, const MetricList& val, bool* improved);
  bool stopped() const { return stopped_epoch_ > 0; }
  int64_t stopped_epoch() const { return stopped_epoch_; }
  int64_t best_epoch() const { return best_epoch_; }
  double best() const { return best_; }
  nlohmann::json state() const;
  void restore(const nlohmann::json& j);

 private:
  EarlyStoppingConfig c_;
  double best_ = std::numeric_limits<double>::quiet_NaN();
  int64_t best_epoch_ = 0, wait_ = 0, stopped_epoch_ = 0;
};

}  // namespace trainer
