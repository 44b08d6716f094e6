// Entry point of the CPU test binary: a logged warning fails the test (tests/warning_sink.h), and
// the conformance table registers one test per row (tests/conformance/).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "tests/conformance/conformance_tests.h"
#include "tests/warning_sink.h"

int main(int argc, char** argv) {
  trainer::test::install_warning_sink();
  trainer::conformance::register_cpu_tests();
  const int failed = Catch::Session().run(argc, argv);
  return trainer::test::report_background_warnings() > 0 ? 1 : failed;
}
