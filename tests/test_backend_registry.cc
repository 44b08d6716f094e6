// BackendRegistry: what it says when the device asked for cannot be made.
#include <catch2/catch.hpp>
#include <memory>
#include <string>
#include <vector>

#include "lib/backend/backend_registry.h"
#include "lib/core/error.h"

using namespace trainer;

TEST_CASE("an error's own line breaks are not shown as \\x0a: a missing GPU lists the GPUs on one line",
          "[backend]") {
  BackendRegistry reg;
  BackendEntry gpu;
  gpu.name = "cuda";
  gpu.make = [](const DeviceRequest&, int) -> std::unique_ptr<Backend> { return nullptr; };
  gpu.list_gpus = [](std::string*) {
    std::vector<GpuInfo> gpus(2);
    gpus[0].name = "NVIDIA H200";
    gpus[1].index = 1;
    gpus[1].name = "NVIDIA H100";
    return gpus;
  };
  reg.add(gpu);
  DeviceRequest req;
  req.device = "gpu:7";
  try {
    reg.create(req, nullptr);
    FAIL("gpu:7 was created");
  } catch (const RuntimeError& e) {
    const std::string m = e.what();
    REQUIRE(m == "device gpu:7 does not exist; GPUs present: gpu:0 (NVIDIA H200), gpu:1 (NVIDIA H100)");
  }
}
