// Training controls that run between steps or epochs, on the host:
//
//   EarlyStopping  Keras' EarlyStopping: stop when `monitor` has not improved by more than
//                  min_delta for `patience` epochs; restore_best puts back the weights of the
//                  best epoch when it stops. Its MonitorTracker (monitor.h) is also the run's
//                  best when early stopping is on.
// (Gradient clipping is not here: it runs on the device inside the step, ClipKernel in
// lib/backend/step_kernels.h.) Every state that must survive --resume has state()/restore() as JSON.
#pragma once

#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/backend/backend.h"
#include "lib/config/config.h"
#include "lib/model/model.h"
#include "lib/train/monitor.h"
#include "lib/train/schedules.h"

namespace trainer {

class EarlyStopping {
 public:
  explicit EarlyStopping(const EarlyStoppingConfig& c) : c_(c), tracker_(c.monitor, c.mode, c.min_delta) {}
  bool enabled() const { return c_.enabled; }
  const EarlyStoppingConfig& config() const { return c_; }
  // After each epoch. Returns true when training must stop now; *improved tells whether this
  // epoch is the new best (the caller keeps its weights for restore_best).
  bool on_epoch_end(int64_t epoch, const MetricList& train, const MetricList& val, bool* improved);
  bool stopped() const { return stopped_epoch_ > 0; }
  int64_t stopped_epoch() const { return stopped_epoch_; }
  int64_t best_epoch() const { return tracker_.best_epoch(); }
  double best() const { return tracker_.best(); }
  const MonitorTracker& tracker() const { return tracker_; }
  nlohmann::json state() const;
  void restore(const nlohmann::json& j);

 private:
  EarlyStoppingConfig c_;
  MonitorTracker tracker_;
  int64_t stopped_epoch_ = 0;
};

}  // namespace trainer
