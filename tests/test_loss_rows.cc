// The loss conformance table (tests/loss_rows.h) on the CPU: every registered loss has a row and a
// kernel on every backend this build registers; every row's kernel, made through the registry as
// the executor makes it, matches the float64 reference (the mean loss, relative 1e-6) and its
// gradient matches the reference's finite differences (h = 1e-3 in float,
// |analytic - numeric| <= 1e-4 + 1e-3 |numeric|), in training runs (class weights on) and not.
#include <catch2/catch.hpp>
#include <cmath>
#include <set>

#include "kernels/cpu/cpu_backend.h"
#include "lib/backend/backend_registry.h"
#include "tests/loss_rows.h"
#include "tests/test_loss.h"

using namespace trainer;
using test::LossRow;

TEST_CASE("every registered loss has a conformance row and a kernel on every backend", "[loss][registry]") {
  std::set<std::string> rows;
  for (const LossRow& r : test::loss_rows()) rows.insert(r.name);
  const LossRegistry& reg = LossRegistry::global();
  for (const LossEntry& e : reg.entries()) {
    INFO("loss " << e.name);
    CHECK(rows.count(e.name) == 1);
    for (const std::string& backend : BackendRegistry::global().names()) {
      INFO("backend " << backend);
      CHECK(reg.has_kernel(e.name, backend));
    }
  }
  for (const std::string& name : rows) {
    INFO("row " << name);
    CHECK(reg.find(name) != nullptr);
  }
}

TEST_CASE("every loss row matches its float64 reference and finite differences on the cpu",
          "[loss][gradient]") {
  const int64_t B = 6, K = 7;
  CpuBackend be;
  for (const LossRow& row : test::loss_rows()) {
    for (bool training : {false, true}) {
      INFO(row.yaml << (training ? " (training)" : ""));
      const test::LossBatch b = test::loss_batch(row, B, K, 17);
      test::TestLoss loss(be, row.yaml, K, B);
      REQUIRE(loss.spec().on_values() == row.on_values());
      std::vector<float> dout(b.out.size());
      float sum = 0;
      const void* targets = row.on_values() ? static_cast<const void*>(b.values.data()) : b.labels.data();
      loss.run(b.out.data(), targets, B, dout.data(), &sum, nullptr, training);
      const long double ref = test::reference_loss(row, b.out, b, B, K, training);
      REQUIRE(double(sum) / B == Approx(double(ref)).epsilon(1e-6));
      for (size_t i = 0; i < b.out.size(); ++i) {
        // mae and huber have kinks: keep away from them so the difference quotient is the slope.
        if (row.on_values()) {
          const double e = std::abs(double(b.out[i]) - double(b.values[i]));
          if (row.ref == LossRow::mae && e < 2e-3) continue;
          if (row.ref == LossRow::huber && std::abs(e - row.delta) < 2e-3) continue;
        }
        const float h = 1e-3f;
        auto up = b.out, down = b.out;
        up[i] += h;
        down[i] -= h;
        const double numeric = double(test::reference_loss(row, up, b, B, K, training) -
                                      test::reference_loss(row, down, b, B, K, training)) /
                               (double(up[i]) - double(down[i]));
        INFO("element " << i);
        REQUIRE(std::abs(double(dout[i]) - numeric) <= 1e-4 + 1e-3 * std::abs(numeric));
      }
    }
  }
}

TEST_CASE("a loss kernel adds its top-k counts and confusion matrix after them", "[loss][metrics]") {
  // 3 samples, 3 classes. argmax: 2, 0, 1. labels: 2, 1, 1. Top-1: 2 hits, top-2: 3.
  CpuBackend be;
  test::TestLoss loss(be, "sparse_categorical_crossentropy", 3, 3, {1, 2});
  REQUIRE(loss.spec().metric_floats() == 2 + 9);
  const std::vector<float> out{0.1f, 0.2f, 0.7f, 0.5f, 0.4f, 0.1f, 0.2f, 0.6f, 0.2f};
  const std::vector<int32_t> y{2, 1, 1};
  std::vector<float> dout(9), sums(11, 0.f);
  float sum = 0;
  loss.run(out.data(), y.data(), 3, dout.data(), &sum, sums.data());
  REQUIRE(sums == std::vector<float>{2, 3, 0, 0, 0, 1, 1, 0, 0, 0, 1});
}

TEST_CASE("a loss without a kernel on a backend is a config error naming both", "[loss][registry]") {
  LossSpec s = loss_config("mse").spec(1);
  REQUIRE_THROWS_WITH(LossRegistry::global().make_kernel("tpu", s),
                      Catch::Contains("loss 'mse'") && Catch::Contains("tpu backend"));
}
