#include "lib/train/schedules.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace trainer {

LrSchedule::LrSchedule(const ScheduleConfig& c, double base_lr, int64_t steps_per_epoch, int64_t epochs)
    : c_(c),
      base_(base_lr),
      steps_per_epoch_(std::max<int64_t>(steps_per_epoch, 1)),
      total_steps_(std::max<int64_t>(steps_per_epoch, 1) * std::max<int64_t>(epochs, 1)),
      warmup_(c.warmup_steps > 0 ? c.warmup_steps : c.warmup_epochs * std::max<int64_t>(steps_per_epoch, 1)),
      current_(base_lr),
      plateau_(c.monitor, c.mode, c.min_delta) {}

double LrSchedule::lr_at(int64_t t) const {
  const int64_t e = (t - 1) / steps_per_epoch_;
  double lr = base_;
  if (c_.type == "step") {
    lr = base_ * std::pow(c_.gamma, double(e / c_.step_size));
  } else if (c_.type == "exponential") {
    lr = base_ * std::pow(c_.gamma, double(e));
  } else if (c_.type == "cosine") {
    const double span = double(std::max<int64_t>(total_steps_ - warmup_, 1));
    const double p = std::clamp(double(t - warmup_) / span, 0.0, 1.0);
    lr = c_.min_lr + (base_ - c_.min_lr) * 0.5 * (1.0 + std::cos(M_PI * p));
  } else if (c_.type == "reduce_on_plateau") {
    lr = current_;
  }
  if (warmup_ > 0 && t <= warmup_) lr *= double(t) / double(warmup_);
  return lr;
}

bool LrSchedule::on_epoch_end(int64_t epoch, const MetricList& train, const MetricList& val) {
  if (c_.type != "reduce_on_plateau") return false;
  plateau_.observe(epoch, train, val);
  if (cooldown_left_ > 0) {
    --cooldown_left_;
    plateau_.reset_wait();  // as PyTorch: epochs in cooldown do not count
  }
  if (plateau_.wait() > c_.patience) {
    const double next = std::max(current_ * c_.factor, c_.min_lr);
    plateau_.reset_wait();
    cooldown_left_ = c_.cooldown;
    if (current_ - next > 1e-12 * current_) {
      current_ = next;
      return true;
    }
  }
  return false;
}

nlohmann::json LrSchedule::state() const {
  nlohmann::json j = plateau_.state();
  j["type"] = c_.type;
  j["current_lr"] = current_;
  j["cooldown_left"] = cooldown_left_;
  return j;
}

void LrSchedule::restore(const nlohmann::json& j) {
  if (!j.is_object() || j.value("type", "") != c_.type) return;  // the schedule changed: start it fresh
  current_ = j.value("current_lr", base_);
  cooldown_left_ = j.value("cooldown_left", int64_t(0));
  nlohmann::json tracked = j;
  if (!tracked.contains("monitor")) {  // a checkpoint of an older build: "bad_epochs", no monitor
    tracked["monitor"] = c_.monitor;
    tracked["wait"] = j.value("bad_epochs", int64_t(0));
  }
  plateau_.restore(tracked);
}

}  // namespace trainer
