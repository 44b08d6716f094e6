#include "lib/train/progress.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <iostream>

#include "lib/core/json_text.h"

namespace trainer {

using Clock = std::chrono::steady_clock;

std::string format_metrics(const std::vector<std::pair<std::string, double>>& m, const std::string& prefix) {
  std::string s;
  char buf[128];
  for (const auto& kv : m) {
    std::snprintf(buf, sizeof buf, " %s%s=%.4f", prefix.c_str(), kv.first.c_str(), kv.second);
    s += buf;
  }
  return s;
}

Json number_or_null(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

std::string timestamp_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

EpochRecord epoch_record(int64_t epoch, int64_t epochs, int64_t step,
                         const std::vector<std::pair<std::string, double>>& train,
                         const std::vector<std::pair<std::string, double>>& val, double lr, bool show_lr,
                         double seconds, double ms_per_step) {
  EpochRecord r;
  char lr_text[48] = "", timing[128];
  if (show_lr) std::snprintf(lr_text, sizeof lr_text, " lr=%.4g", lr);
  // Three significant digits keep sub-millisecond GPU steps readable: "(0.412 ms/step)".
  std::snprintf(timing, sizeof timing, "%s time=%.2fs (%.3g ms/step)", lr_text, seconds, ms_per_step);
  r.line = "[" + timestamp_now() + "] epoch " + std::to_string(epoch) + "/" + std::to_string(epochs) +
           format_metrics(train, "") + format_metrics(val, "val_") + timing;
  r.json = Json{{"event", "epoch"}, {"epoch", epoch}, {"epochs", epochs}, {"step", step}};
  for (const auto& kv : train) r.columns.emplace_back(kv.first, kv.second);
  for (const auto& kv : val) r.columns.emplace_back("val_" + kv.first, kv.second);
  r.columns.emplace_back("lr", lr);
  r.columns.emplace_back("seconds", seconds);
  for (const auto& kv : r.columns) r.json[kv.first] = number_or_null(kv.second);
  return r;
}

Reporter::Reporter(const ReportOptions& o, std::ostream& out) : o_(o), out_(out) {
  text_ = o_.format == LogFormat::json ? (o_.text ? o_.text : &std::cerr) : &out_;
  if (o_.quiet) o_.live = false;
}

void Reporter::epoch_begin(int64_t epoch, int64_t epochs, int64_t steps, int64_t first_step) {
  epoch_ = epoch;
  epochs_ = epochs;
  steps_ = steps;
  first_step_ = first_step;
  t0_ = last_ = Clock::now();
}

bool Reporter::wants_refresh(int64_t step) {
  if (!o_.live) return false;
  if (o_.log_every > 0) return step % o_.log_every == 0 || step == steps_;
  const auto now = Clock::now();
  if (step != first_step_ + 1 && now - last_ < std::chrono::milliseconds(500)) return false;
  return true;
}

static std::string seconds_text(double s) {
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.1fs", s);
  else
    std::snprintf(buf, sizeof buf, "%dm%02ds", int(s) / 60, int(s) % 60);
  return buf;
}

std::string live_line(int64_t epoch, int64_t epochs, int64_t step, int64_t steps, double elapsed,
                      double per_step, const std::vector<std::pair<std::string, double>>& running,
                      int columns) {
  const size_t cols = size_t(columns > 1 ? columns : 120) - 1;  // never wrap: \r must reach the start
  char text[160];
  std::snprintf(text, sizeof text, " %s %.1fms/step", seconds_text(elapsed).c_str(), 1000.0 * per_step);
  const std::string timing = text;
  const std::string eta = " ETA " + seconds_text(per_step * double(steps - step));
  std::vector<std::string> metrics;
  for (const auto& kv : running) metrics.push_back(format_metrics({kv}, ""));
  // The parts that give way to a narrow terminal, in this order: the bar shrinks (20 columns down
  // to 6), then goes; then the elapsed time and ms/step; the step counter's padding; the ETA; and
  // only then the metrics, the last first.
  struct Layout {
    size_t bar = 20;
    bool timing = true, padded = true, eta = true;
    size_t metrics = 0;
  };
  const auto join = [&](const Layout& l) {
    std::snprintf(text, sizeof text, l.padded ? "epoch %lld/%lld %6lld/%lld" : "epoch %lld/%lld %lld/%lld",
                  (long long)epoch, (long long)epochs, (long long)step, (long long)steps);
    std::string line = text;
    if (l.bar > 0) {
      const size_t filled = steps > 0 ? size_t(double(l.bar) * double(step) / double(steps)) : l.bar;
      std::string bar(l.bar, '.');
      for (size_t i = 0; i < filled && i < l.bar; ++i) bar[i] = '=';
      if (filled < l.bar) bar[filled] = '>';
      line += " [" + bar + "]";
    }
    if (l.timing) line += timing;
    if (l.eta) line += eta;
    for (size_t i = 0; i < l.metrics; ++i) line += metrics[i];
    return line;
  };
  Layout l;
  l.metrics = metrics.size();
  std::vector<Layout> narrower;
  for (size_t width = 20; width >= 6; --width) narrower.push_back(l), narrower.back().bar = width;
  l.bar = 0;
  narrower.push_back(l);
  l.timing = false;
  narrower.push_back(l);
  l.padded = false;
  narrower.push_back(l);
  l.eta = false;
  narrower.push_back(l);
  while (l.metrics > 0) --l.metrics, narrower.push_back(l);
  for (const Layout& candidate : narrower) {
    std::string line = join(candidate);
    if (line.size() <= cols) return line;
  }
  return join(l).substr(0, cols);
}

void Reporter::refresh(int64_t step, const Metrics& running) {
  const auto now = Clock::now();
  last_ = now;
  const double elapsed = std::chrono::duration<double>(now - t0_).count();
  const int64_t done_here = std::max<int64_t>(step - first_step_, 1);
  const double per_step = elapsed / double(done_here);
  *text_ << "\r" << live_line(epoch_, epochs_, step, steps_, elapsed, per_step, running, o_.columns)
         << "\x1b[K" << std::flush;
  live_drawn_ = true;
  check_streams();
}

void Reporter::check_streams() {
  auto notice = [](std::ostream& s, bool& failed) {
    if (failed || s) return;
    failed = true;
    spdlog::warn(
        "{}: the output stream is closed (broken pipe?); nothing more is printed there, training goes on and "
        "the run directory keeps every record",
        &s == &std::cout ? "stdout" : "the text output");
  };
  notice(out_, out_failed_);
  if (text_ != &out_) notice(*text_, text_failed_);
}

void Reporter::clear_live() {
  if (!live_drawn_) return;
  *text_ << "\r\x1b[K";
  live_drawn_ = false;
}

void Reporter::epoch_end(const std::string& text_line, const Json& record) {
  clear_live();
  if (o_.quiet) return;
  if (o_.format == LogFormat::json) out_ << json_text(record) << std::endl;
  *text_ << text_line << std::endl;
  check_streams();
}

void Reporter::note(const std::string& line) {
  clear_live();
  if (!o_.quiet) *text_ << line << std::flush;
  check_streams();
}

void Reporter::summary(const std::string& text_line, const Json& record) {
  clear_live();
  if (o_.format == LogFormat::json) out_ << json_text(record) << std::endl;
  if (o_.format == LogFormat::text || !o_.quiet) *text_ << text_line << std::endl;
  check_streams();
}

}  // namespace trainer
