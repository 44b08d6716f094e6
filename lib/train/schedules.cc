#include "lib/train/schedules.h"

#include <algorithm>
#include <cmath>
#include <limits>

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

LrSchedule::LrSchedule(const ScheduleConfig& c, double base_lr, int64_t steps_per_epoch, int64_t epochs)
    : c_(c),
      base_(base_lr),
      steps_per_epoch_(std::max<int64_t>(steps_per_epoch, 1)),
      total_steps_(std::max<int64_t>(steps_per_epoch, 1) * std::max<int64_t>(epochs, 1)),
      warmup_(c.warmup_steps > 0 ? c.warmup_steps : c.warmup_epochs * std::max<int64_t>(steps_per_epoch, 1)),
      current_(base_lr),
      best_(std::numeric_limits<double>::quiet_NaN()) {}

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

bool LrSchedule::on_epoch_end(const MetricList& train, const MetricList& val) {
  if (c_.type != "reduce_on_plateau") return false;
  const double v = metric_value(train, val, c_.monitor);
  if (improves(c_.mode, v, best_, c_.min_delta)) {
    best_ = v;
    bad_epochs_ = 0;
  } else {
    ++bad_epochs_;
  }
  if (cooldown_left_ > 0) {
    --cooldown_left_;
    bad_epochs_ = 0;  // as PyTorch: epochs in cooldown do not count
  }
  if (bad_epochs_ > c_.patience) {
    const double next = std::max(current_ * c_.factor, c_.min_lr);
    bad_epochs_ = 0;
    cooldown_left_ = c_.cooldown;
    if (current_ - next > 1e-12 * current_) {
      current_ = next;
      return true;
    }
  }
  return false;
}

nlohmann::json LrSchedule::state() const {
  nlohmann::json j{{"type", c_.type},
                   {"current_lr", current_},
                   {"bad_epochs", bad_epochs_},
                   {"cooldown_left", cooldown_left_}};
  j["best"] = std::isnan(best_) ? nlohmann::json(nullptr) : nlohmann::json(best_);
  return j;
}

void LrSchedule::restore(const nlohmann::json& j) {
  if (!j.is_object() || j.value("type", "") != c_.type) return;  // the schedule changed: start it fresh
  current_ = j.value("current_lr", base_);
  bad_epochs_ = j.value("bad_epochs", int64_t(0));
  cooldown_left_ = j.value("cooldown_left", int64_t(0));
  best_ = j.contains("best") && j["best"].is_number() ? j["best"].get<double>()
                                                      : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace trainer
