// Every layer's backward against central finite differences of its forward, on the CPU backend,
// with the harness of tests/gradient_check.h.
//
// Scalar objective: L = sum(y * r) for a fixed random r, computed in double from float outputs.
// Numeric: dL/dv = (L(v + h) - L(v - h)) / 2h with h = 1e-2 (1e-3 near kinks: relu, max pooling).
// Inputs are a shuffled grid of distinct values spaced >= 2/n apart, so no max-pool window holds
// a near tie and no relu input sits within h of its kink.
// Pass: |analytic - numeric| <= 2e-3 + 2e-2 * |numeric| for every input and parameter element
// (the parameter slots' padding included).
#include <catch2/catch.hpp>

#include "tests/gradient_check.h"

using namespace trainer;

using Harness = test::GradientHarness;

TEST_CASE("dense backward matches finite differences", "[gradient]") {
  Harness(" {type: dense, units: 5}", Shape{7}, 3, 11).check_all(1e-2f);
  Harness(" {type: dense, units: 4, use_bias: false}", Shape{6}, 2, 12).check_all(1e-2f);
}

TEST_CASE("conv2d backward matches finite differences (valid, same, strided, no bias)", "[gradient]") {
  Harness("{type: conv2d, filters: 3, kernel_size: 3}", Shape{2, 6, 6}, 2, 21).check_all(1e-2f);
  Harness("{type: conv2d, filters: 2, kernel_size: 3, padding: same, strides: 2}", Shape{2, 7, 7}, 2, 22).check_all(1e-2f);
  Harness("{type: conv2d, filters: 2, kernel_size: [2, 3], use_bias: false}", Shape{1, 5, 6}, 2, 23).check_all(1e-2f);
}

TEST_CASE("maxpool2d and avgpool2d backward match finite differences", "[gradient]") {
  SECTION("max 2x2") { Harness("{type: maxpool2d, pool_size: 2}", Shape{2, 6, 6}, 2, 31).check_all(1e-3f); }
  SECTION("avg 2x2") { Harness("{type: avgpool2d, pool_size: 2}", Shape{2, 6, 6}, 2, 32).check_all(1e-2f); }
  SECTION("max 3x3 stride 2 same") { Harness("{type: maxpool2d, pool_size: 3, strides: 2, padding: same}", Shape{1, 7, 7}, 2, 33).check_all(1e-3f); }
}

TEST_CASE("activation backward matches finite differences", "[gradient]") {
  for (const char* t : {"relu", "sigmoid", "tanh", "gelu", "leaky_relu"}) {
    SECTION(t) {
      Harness(std::string("{type: ") + t + "}", Shape{3, 4}, 2, 41).check_all(1e-3f);
    }
  }
  SECTION("softmax") { Harness("{type: softmax}", Shape{6}, 3, 42).check_all(1e-2f); }
  SECTION("log_softmax") { Harness("{type: log_softmax}", Shape{6}, 3, 43).check_all(1e-2f); }
}

TEST_CASE("dropout and dropout2d backward match finite differences with the step's mask", "[gradient]") {
  Harness("{type: dropout, rate: 0.4}", Shape{10}, 3, 51).check_all(1e-2f);
  Harness("{type: dropout2d, rate: 0.5}", Shape{4, 3, 3}, 2, 52).check_all(1e-2f);
}

TEST_CASE("dropout keeps about 1-rate of the units and scales them and eval is the identity", "[layers]") {
  Harness h("{type: dropout, rate: 0.3}", Shape{1000}, 4, 61);
  h.kernel->forward(h.x.data(), h.y.data(), true);
  int kept = 0;
  for (size_t i = 0; i < h.y.size(); ++i) {
    if (h.y[i] != 0.f) {
      ++kept;
      REQUIRE(h.y[i] == Approx(h.x[i] / 0.7f));
    }
  }
  REQUIRE(kept / 4000.0 == Approx(0.7).margin(0.03));
  h.kernel->forward(h.x.data(), h.y.data(), false);
  REQUIRE(h.y == h.x);
}

TEST_CASE("dropout2d drops whole channels", "[layers]") {
  Harness h("{type: dropout2d, rate: 0.5}", Shape{8, 4, 4}, 4, 62);
  h.kernel->forward(h.x.data(), h.y.data(), true);
  for (int64_t c = 0; c < 32; ++c) {
    bool zero = h.y[size_t(c * 16)] == 0.f;
    for (int64_t i = 0; i < 16; ++i) REQUIRE((h.y[size_t(c * 16 + i)] == 0.f) == zero);
  }
}
