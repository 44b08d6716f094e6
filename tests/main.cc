// Entry point of the CPU test binary: the same backend registration as cmd/main.cc, then the
// Catch2 session.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "kernels/register_backends.h"
#include "lib/backend/backend_registry.h"
#include "lib/registry/registry.h"

int main(int argc, char** argv) {
  trainer::register_backends(trainer::BackendRegistry::global(), trainer::Registry::global());
  return Catch::Session().run(argc, argv);
}
