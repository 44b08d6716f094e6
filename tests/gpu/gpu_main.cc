// Entry point of the GPU test binary: without a usable GPU it prints why and exits 77, which
// ctest reports as "Skipped" (SKIP_RETURN_CODE in tests/CMakeLists.txt); otherwise it runs the
// Catch2 session: tests/gpu/test_gpu_*.cc and the conformance table's rows on the CUDA backend,
// each against the CPU (tests/conformance/). A logged warning fails the test that logged it
// (tests/warning_sink.h).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "kernels/register_backends.h"
#include "lib/backend/backend_registry.h"
#include "lib/registry/registry.h"
#include "tests/conformance/conformance_tests.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/warning_sink.h"

namespace {
trainer::Backend& cuda() { return trainer::gpu_test::cuda_backend(); }
trainer::Backend& cpu() { return trainer::gpu_test::cpu_backend(); }
}  // namespace

int main(int argc, char** argv) {
  // The same registration as cmd/main.cc: the CPU and CUDA backends and their kernels.
  trainer::register_backends(trainer::BackendRegistry::global(), trainer::Registry::global());
  std::string why;
  const std::vector<trainer::GpuInfo> gpus = trainer::BackendRegistry::global().list_gpus(&why);
  if (gpus.empty()) {
    std::printf("SKIPPED: no usable GPU (%s)\n", why.c_str());
    return 77;
  }
  const trainer::GpuInfo& g = gpus.front();
  if (!g.problem.empty()) {  // a GPU is here but this build has no code for it: a failure
    std::printf("FAILED: %s\n", g.problem.c_str());
    return 1;
  }
  std::printf("GPU tests on gpu:%d %s (compute capability %d.%d, %zu MiB); %s\n", g.index, g.name.c_str(),
              g.cc_major, g.cc_minor, g.total_bytes >> 20,
              trainer::BackendRegistry::global().gpu_versions().c_str());
  std::fflush(stdout);
  trainer::test::install_warning_sink();
  trainer::conformance::register_backend_tests("cuda", cuda, cpu);
  const int failed = Catch::Session().run(argc, argv);
  return trainer::test::report_background_warnings() > 0 ? 1 : failed;
}
