#include "lib/train/monitor.h"

#include <cmath>

#include "lib/train/progress.h"  // number_or_null

namespace trainer {

double metric_value(const MetricList& train, const MetricList& val, const std::string& name) {
  const bool is_val = name.rfind("val_", 0) == 0;
  const MetricList& list = is_val ? val : train;
  const std::string key = is_val ? name.substr(4) : name;
  for (const auto& kv : list)
    if (kv.first == key) return kv.second;
  return std::numeric_limits<double>::quiet_NaN();
}

bool improves(MonitorMode mode, double value, double best, double min_delta) {
  if (std::isnan(value)) return false;
  if (std::isnan(best)) return true;
  return mode == MonitorMode::min ? value < best - min_delta : value > best + min_delta;
}

bool MonitorTracker::observe(int64_t epoch, const MetricList& train, const MetricList& val) {
  return observe_value(epoch, metric_value(train, val, monitor_));
}

bool MonitorTracker::observe_value(int64_t epoch, double value) {
  if (!improves(mode_, value, best_, min_delta_)) {
    ++wait_;
    return false;
  }
  best_ = value;
  best_epoch_ = epoch;
  wait_ = 0;
  return true;
}

nlohmann::json MonitorTracker::state() const {
  return {
      {"monitor", monitor_}, {"best", number_or_null(best_)}, {"best_epoch", best_epoch_}, {"wait", wait_}};
}

void MonitorTracker::restore(const nlohmann::json& j) {
  if (!j.is_object() || j.value("monitor", "") != monitor_) return;
  best_ = j.contains("best") && j["best"].is_number() ? j["best"].get<double>()
                                                      : std::numeric_limits<double>::quiet_NaN();
  best_epoch_ = j.value("best_epoch", int64_t(0));
  wait_ = j.value("wait", int64_t(0));
}

}  // namespace trainer
