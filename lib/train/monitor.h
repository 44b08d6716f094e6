// The one notion of "best" in a run: a monitored quantity ("val_loss", "accuracy", ...), the best
// value it reached, the epoch of that value and the epochs since, with one improvement rule.
//
//   MonitorTracker   improves when the value beats the best by more than min_delta (names
//                    ending in "loss" are minimized, others maximized; NaN never improves).
// Early stopping (patience), reduce_on_plateau (patience, cooldown) and the run's best (the done
// line, summary.json, checkpoints/best.safetensors, restore_best) each read one of these; when
// early stopping is on, the run's best *is* early stopping's tracker (lib/train/fit.cc), so they
// cannot disagree about which epoch was best.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "lib/config/config.h"

namespace trainer {

using MetricList = std::vector<std::pair<std::string, double>>;

// The value of `name` in train metrics ("loss") or validation metrics ("val_loss"); NaN when
// absent.
double metric_value(const MetricList& train, const MetricList& val, const std::string& name);

// Whether `value` improves on `best` by more than min_delta (always true when best is NaN).
bool improves(MonitorMode mode, double value, double best, double min_delta);

class MonitorTracker {
 public:
  MonitorTracker() = default;
  MonitorTracker(std::string monitor, double min_delta)
      : monitor_(std::move(monitor)), mode_(default_mode(monitor_)), min_delta_(min_delta) {}
  MonitorTracker(std::string monitor, MonitorMode mode, double min_delta)
      : monitor_(std::move(monitor)), mode_(mode), min_delta_(min_delta) {}

  const std::string& monitor() const { return monitor_; }
  // Records this epoch's value of the monitor; true when it is a new best (wait restarts at 0),
  // else the epochs without improvement grow by one.
  bool observe(int64_t epoch, const MetricList& train, const MetricList& val);
  bool observe_value(int64_t epoch, double value);
  double best() const { return best_; }               // NaN before the first finite value
  int64_t best_epoch() const { return best_epoch_; }  // 0 before the first improvement
  int64_t wait() const { return wait_; }              // epochs since the best one
  void reset_wait() { wait_ = 0; }

  // {"monitor", "best", "best_epoch", "wait"}; restore() ignores the state of another monitor
  // (the config changed: start afresh).
  nlohmann::json state() const;
  void restore(const nlohmann::json& j);

 private:
  std::string monitor_;
  MonitorMode mode_ = MonitorMode::min;
  double min_delta_ = 0;
  double best_ = std::numeric_limits<double>::quiet_NaN();
  int64_t best_epoch_ = 0, wait_ = 0;
};

}  // namespace trainer
