// Learning-rate schedules, computed on the host for every update and passed to
// Executor::train_step (no device work, no sync).
//
// With base = optimizer.lr, t = the 1-based update number, e = (t - 1) / steps_per_epoch the
// 0-based epoch of that update and T = epochs * steps_per_epoch:
//   constant           lr = base
//   step               lr = base * gamma^floor(e / step_size)                 (PyTorch StepLR)
//   exponential        lr = base * gamma^e                                     (ExponentialLR)
//   cosine             lr = min_lr + (base - min_lr) * (1 + cos(pi * p)) / 2,
//                      p = (t - W) / (T - W) after the warmup W, clamped to [0, 1]
//   reduce_on_plateau  lr = the current value; at an epoch end that makes more than `patience`
//                      epochs in a row without an improvement of `monitor` by more than min_delta,
//                      lr = max(lr * factor, min_lr), then `cooldown` epochs are not counted
//                      (PyTorch's ReduceLROnPlateau with threshold_mode "abs")
// Warmup (warmup_steps, or warmup_epochs * steps_per_epoch = W) multiplies any of these by t / W
// for t <= W. The reduce_on_plateau state travels with checkpoints (state()/restore()).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "lib/config/config.h"
#include "lib/train/monitor.h"

namespace trainer {

class LrSchedule {
 public:
  LrSchedule(const ScheduleConfig& c, double base_lr, int64_t steps_per_epoch, int64_t epochs);

  // The learning rate of update t (1-based).
  double lr_at(int64_t t) const;
  bool is_constant() const { return c_.type == "constant" && warmup_ == 0; }

  // reduce_on_plateau: reads the monitor; returns true when it lowered the rate.
  bool on_epoch_end(int64_t epoch, const MetricList& train, const MetricList& val);

  nlohmann::json state() const;
  void restore(const nlohmann::json& state);

 private:
  ScheduleConfig c_;
  double base_;
  int64_t steps_per_epoch_, total_steps_, warmup_;
  // reduce_on_plateau: the epochs without improvement are plateau_.wait()
  double current_;
  MonitorTracker plateau_;
  int64_t cooldown_left_ = 0;
};

}  // namespace trainer
