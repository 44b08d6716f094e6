// A logged warning fails the test that logged it (tiny-cuda-nn's rule): tests/main.cc and
// tests/gpu/gpu_main.cc install a spdlog sink that turns every warning, error or critical message
// into a failed check of the current test, unless an ExpectWarning guard in scope expects it.
//
//   {
//     test::ExpectWarning clamp("were clamped");   // this block must log such a warning
//     kernel->forward(true);
//   }                                              // fails here if none was logged
//
// Messages logged on the test's own thread fail at once (FAIL_CHECK, with the message). Messages
// logged on other threads (a loader thread, OpenMP workers) cannot touch Catch2, which is not
// thread-safe: they are kept, printed at the end, and make the test binary exit 1.
#pragma once

#include <string>

namespace trainer::test {

// Adds the sink to spdlog's default logger; call once, on the thread that runs the tests.
void install_warning_sink();

// Warnings logged on other threads while no guard expected them (for main()'s exit code).
int background_warning_count();
// Prints them to stderr; returns how many.
int report_background_warnings();

// While alive, warnings whose text contains `containing` are expected rather than failures
// (other warnings still fail). Its destructor fails the test if no expected warning came, unless
// `required` is false (a warning that a platform may or may not give: say why where it is used).
class ExpectWarning {
 public:
  explicit ExpectWarning(std::string containing, bool required = true);
  ~ExpectWarning();
  ExpectWarning(const ExpectWarning&) = delete;
  ExpectWarning& operator=(const ExpectWarning&) = delete;
  int seen() const { return seen_; }

 private:
  friend class WarningSink;
  std::string containing_;
  bool required_;
  int seen_ = 0;
  ExpectWarning* outer_;
};

}  // namespace trainer::test
