#include "lib/train/callbacks.h"

namespace trainer {
bool EarlyStopping::on_epoch_end(int64_t epoch, const MetricList& train, const MetricList& val,
                                 bool* improved) {
  *improved = false;
  if (!c_.enabled) return false;
  *improved = tracker_.observe(epoch, train, val);
  if (*improved || tracker_.wait() < c_.patience) return false;
  stopped_epoch_ = epoch;
  return true;
}

nlohmann::json EarlyStopping::state() const {
  nlohmann::json j = tracker_.state();
  j["stopped_epoch"] = stopped_epoch_;
  return j;
}

void EarlyStopping::restore(const nlohmann::json& j) {
  if (!j.is_object() || j.value("monitor", "") != c_.monitor) return;
  tracker_.restore(j);
  stopped_epoch_ = j.value("stopped_epoch", int64_t(0));
}

}  // namespace trainer
