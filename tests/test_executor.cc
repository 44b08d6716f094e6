// The executor plans and allocates everything before the first step, through the backend's
// allocator; under a cap it fails before training with a message that says what would fit.
#include <catch2/catch.hpp>

#include "kernels/cpu/cpu_backend.h"
#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/model/executor.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;

namespace {

const char* kYaml = R"(model:
  input_shape: [1, 28, 28]
  layers:
    - {type: conv2d, filters: 16, kernel_size: 3, padding: same}
    - {type: relu}
    - {type: flatten}
    - {type: dense, units: 10}
data: {train: {format: random}, num_classes: 10}
)";

ExecutorOptions options(int64_t batch) { return test::classifier_options({batch}, 10); }

}  // namespace

TEST_CASE("the executor reserves parameters, gradients, state and activations up front",
          "[executor][memory]") {
  Config c = parse_config(kYaml, "mem.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  CpuBackend backend;
  OptimizerConfig oc;  // adam: two state slots
  Optimizer opt(oc);
  Executor ex(model, backend, opt, options(64));
  const size_t params = size_t(model.param_arena_floats()) * 4;
  REQUIRE(ex.planned_bytes() >= 4 * params);                         // params, grads, m, v
  REQUIRE(ex.planned_bytes() >= size_t(64) * 16 * 28 * 28 * 4 * 2);  // conv output and its gradient
  REQUIRE(backend.allocator().bytes_in_use() == ex.planned_bytes());
  bool named = false;
  for (const auto& m : ex.memory_plan()) named = named || m.what.find("activations") != std::string::npos;
  REQUIRE(named);
}

TEST_CASE("a memory cap too small for the batch fails before training and names the batch that fits",
          "[executor][memory]") {
  Config c = parse_config(kYaml, "mem.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  OptimizerConfig oc;
  Optimizer opt(oc);
  const size_t cap = size_t(4) << 20;  // 4 MiB: about 20 samples of this model's activations
  CpuBackend backend(cap);
  std::string message;
  try {
    Executor ex(model, backend, opt, options(256));
  } catch (const OutOfMemoryError& e) {
    message = e.what();
  }
  REQUIRE_THAT(message, Contains("activations") && Contains("requested") && Contains("in use") &&
                            Contains("cap 4.00 MiB") &&
                            Contains("largest batch size that would fit is about"));
  const int64_t fit = std::stoll(message.substr(message.rfind("about ") + 6));
  REQUIRE(fit >= 1);
  REQUIRE(fit < 256);
  CpuBackend again(cap);
  REQUIRE_NOTHROW(Executor(model, again, opt, options(fit)));
}
