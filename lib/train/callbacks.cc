#include "lib/train/callbacks.h"

#include <cmath>
#include <limits>

#include "lib/train/progress.h"  // number_or_null

namespace trainer {
namespace {

double number_of(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>()
                                               : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

bool BestTracker::update(int64_t epoch, const MetricList& train, const MetricList& val) {
  if (!enabled()) return false;
  const double v = metric_value(train, val, monitor_);
  if (!improves(mode_, v, best_, 0)) return false;
  best_ = v;
  best_epoch_ = epoch;
  return true;
}

nlohmann::json BestTracker::state() const {
  return {{"monitor", monitor_}, {"best", number_or_null(best_)}, {"best_epoch", best_epoch_}};
}

void BestTracker::restore(const nlohmann::json& j) {
  if (!j.is_object() || j.value("monitor", "") != monitor_) return;  // another monitor: start afresh
  best_ = number_of(j, "best");
  best_epoch_ = j.value("best_epoch", int64_t(0));
}

bool EarlyStopping::on_epoch_end(int64_t epoch, const MetricList& train, const MetricList& val,
                                 bool* improved) {
  *improved = false;
  if (!c_.enabled) return false;
  const double v = metric_value(train, val, c_.monitor);
  if (improves(c_.mode, v, best_, c_.min_delta)) {
    best_ = v;
    best_epoch_ = epoch;
    wait_ = 0;
    *improved = true;
    return false;
  }
  if (++wait_ >= c_.patience) {
    stopped_epoch_ = epoch;
    return true;
  }
  return false;
}

nlohmann::json EarlyStopping::state() const {
  return {{"monitor", c_.monitor},
          {"best", number_or_null(best_)},
          {"best_epoch", best_epoch_},
          {"wait", wait_},
          {"stopped_epoch", stopped_epoch_}};
}

void EarlyStopping::restore(const nlohmann::json& j) {
  if (!j.is_object() || j.value("monitor", "") != c_.monitor) return;
  best_ = number_of(j, "best");
  best_epoch_ = j.value("best_epoch", int64_t(0));
  wait_ = j.value("wait", int64_t(0));
  stopped_epoch_ = j.value("stopped_epoch", int64_t(0));
}

}  // namespace trainer
