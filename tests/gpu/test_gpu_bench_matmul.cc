// `trainer bench` without a config: the documents' matmul through the dense layer's GPU kernel,
// bound for the forward pass alone (no gradients), with the kernel's candidate timing on (the
// command's default) and off (--deterministic): the product matches a double reference.
#include "lib/train/bench_matmul.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;

TEST_CASE("gpu bench matmul: a forward-only dense kernel times and checks the product", "[gpu][bench]") {
  for (const bool deterministic : {false, true}) {
    for (const char* size : {"1000x100x1000", "257x31x129"}) {
      INFO((deterministic ? "deterministic, " : "candidates timed, ") << size);
      DeviceRequest dev;
      dev.device = "gpu:0";
      dev.deterministic = deterministic;
      const MatmulTiming t = time_matmul(parse_matmul_shape(size), dev, 3);
      CHECK(t.device == "gpu:0");
      CHECK(t.seconds > 0);
      CHECK(t.gflops > 0);
      INFO("max relative error " << t.max_rel_error);
      CHECK(t.max_rel_error < 1e-5);
    }
  }
}
