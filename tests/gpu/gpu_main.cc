// Entry point of the GPU test binary: without a usable GPU it prints why and exits 77, which
// ctest reports as "Skipped" (SKIP_RETURN_CODE in tests/CMakeLists.txt); otherwise it runs the
// Catch2 session (tests/gpu/test_gpu_*.cc).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "kernels/register_backends.h"
#include "lib/backend/backend_registry.h"
#include "lib/registry/registry.h"

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
  std::printf("GPU tests on gpu:%d %s (compute capability %d.%d, %zu MiB); %s\n", g.index,
              g.name.c_str(), g.cc_major, g.cc_minor, g.total_bytes >> 20,
              trainer::BackendRegistry::global().gpu_versions().c_str());
  std::fflush(stdout);
  return Catch::Session().run(argc, argv);
}
