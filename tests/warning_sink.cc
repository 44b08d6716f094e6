#include "tests/warning_sink.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace trainer::test {
namespace {

std::thread::id g_test_thread;
ExpectWarning* g_expected = nullptr;  // innermost guard; touched only on the test thread
std::mutex g_background_mutex;
std::vector<std::string> g_background;

}  // namespace

class WarningSink : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    if (msg.level < spdlog::level::warn) return;
    const std::string text(msg.payload.data(), msg.payload.size());
    const std::string level(spdlog::level::to_string_view(msg.level).data(),
                            spdlog::level::to_string_view(msg.level).size());
    if (std::this_thread::get_id() != g_test_thread) {
      std::lock_guard<std::mutex> lock(g_background_mutex);
      g_background.push_back(level + ": " + text);
      return;
    }
    for (ExpectWarning* e = g_expected; e; e = e->outer_)
      if (text.find(e->containing_) != std::string::npos) {
        ++e->seen_;
        return;
      }
    FAIL_CHECK("unexpected " << level << " logged (a test that expects it says so with "
                             << "test::ExpectWarning): " << text);
  }
  void flush_() override {}
};

void install_warning_sink() {
  g_test_thread = std::this_thread::get_id();
  auto sink = std::make_shared<WarningSink>();
  sink->set_level(spdlog::level::warn);
  spdlog::default_logger()->sinks().push_back(sink);
}

int background_warning_count() {
  std::lock_guard<std::mutex> lock(g_background_mutex);
  return int(g_background.size());
}

int report_background_warnings() {
  std::lock_guard<std::mutex> lock(g_background_mutex);
  for (const std::string& w : g_background)
    std::fprintf(stderr, "FAILED: %s (logged on a background thread; a logged warning fails the run)\n",
                 w.c_str());
  return int(g_background.size());
}

ExpectWarning::ExpectWarning(std::string containing, bool required)
    : containing_(std::move(containing)), required_(required), outer_(g_expected) {
  g_expected = this;
}

ExpectWarning::~ExpectWarning() {
  g_expected = outer_;
  if (required_ && seen_ == 0 && std::uncaught_exceptions() == 0)
    FAIL_CHECK("expected a warning containing '" << containing_ << "', none was logged");
}

}  // namespace trainer::test
