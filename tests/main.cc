// Entry point of the CPU test binary: the same backend registration as cmd/main.cc; a logged
// warning fails the test (tests/warning_sink.h), and the conformance table registers one test per
// row (tests/conformance/).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "kernels/register_backends.h"
#include "lib/backend/backend_registry.h"
#include "lib/registry/registry.h"
#include "tests/conformance/conformance_tests.h"
#include "tests/warning_sink.h"

int main(int argc, char** argv) {
  trainer::register_backends(trainer::BackendRegistry::global(), trainer::Registry::global());
  trainer::test::install_warning_sink();
  trainer::conformance::register_cpu_tests();
  const int failed = Catch::Session().run(argc, argv);
  return trainer::test::report_background_warnings() > 0 ? 1 : failed;
}
