// data.normalize_targets (lib/train/target_scale.h): a regression trains on standardized targets,
// and its metrics, predictions and exports are in the targets' own units again.
#include <catch2/catch.hpp>
#include <cmath>
#include <iomanip>
#include <sstream>

#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/core/value_loss_formula.h"
#include "lib/metrics/metrics.h"
#include "lib/train/target_scale.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;

namespace {

// Per output: [sum |o - y|, sum (o - y)^2, sum y, sum y^2], as the value-loss kernels accumulate.
std::vector<double> regression_sums(const std::vector<double>& o, const std::vector<double>& y, size_t K) {
  std::vector<double> c(K * kRegressionSums, 0.0);
  for (size_t i = 0; i < o.size(); ++i) {
    double* s = c.data() + (i % K) * kRegressionSums;
    const double e = o[i] - y[i];
    s[0] += std::fabs(e), s[1] += e * e, s[2] += y[i], s[3] += y[i] * y[i];
  }
  return c;
}

// The numbers after "key=" in a line of trainer's output.
double value_after(const std::string& text, const std::string& key) {
  const size_t at = text.rfind(key + "=");
  REQUIRE(at != std::string::npos);
  return std::atof(text.c_str() + at + key.size() + 1);
}

}  // namespace

TEST_CASE("standardized regression sums convert exactly into the targets' units", "[metrics][values]") {
  // Two outputs of very different scales, five samples.
  const std::vector<double> y{5100, 0.02, 4900, 0.03, 5300, 0.01, 5000, 0.05, 4700, 0.04};
  const std::vector<double> o{5150, 0.025, 4800, 0.02, 5310, 0.015, 4950, 0.06, 4790, 0.035};
  const TargetScale t{{5000, 0.03}, {200, 0.0141}};
  std::vector<double> ys(y.size()), os(o.size());
  for (size_t i = 0; i < y.size(); ++i) {
    ys[i] = (y[i] - t.mean[i % 2]) / t.std[i % 2];
    os[i] = (o[i] - t.mean[i % 2]) / t.std[i % 2];
  }
  MetricSums standardized;
  standardized.samples = 5;
  standardized.loss_sum = 1.25;
  standardized.confusion = regression_sums(os, ys, 2);
  const MetricSums converted = in_target_units(standardized, t);
  const std::vector<double> direct = regression_sums(o, y, 2);
  REQUIRE(converted.confusion.size() == direct.size());
  for (size_t i = 0; i < direct.size(); ++i) {
    INFO("sum " << i);
    REQUIRE(converted.confusion[i] == Approx(direct[i]).epsilon(1e-12));
  }
  REQUIRE(converted.loss_sum == 1.25);  // the loss stays standardized, as the optimizer saw it
  for (int64_t k = 0; k < 2; ++k) {
    MetricSums d = standardized;
    d.confusion = direct;
    const RegressionRow a = regression_row(converted, k), b = regression_row(d, k);
    REQUIRE(a.mae == Approx(b.mae));
    REQUIRE(a.rmse == Approx(b.rmse));
    REQUIRE(a.r2 == Approx(b.r2));
    // R^2 does not depend on the scale; MAE and RMSE scale by std.
    REQUIRE(regression_row(standardized, k).r2 == Approx(a.r2));
    REQUIRE(a.mae == Approx(regression_row(standardized, k).mae * t.std[size_t(k)]));
  }
  REQUIRE(in_target_units(standardized, TargetScale{}).confusion == standardized.confusion);
}

TEST_CASE("target statistics are the population mean and std per output; a constant output is only centred",
          "[data][values]") {
  Dataset d;
  d.target_width = 2;
  d.targets = {1, 7, 2, 7, 3, 7, 6, 7};  // output 0: 1 2 3 6; output 1 constant
  d.sample_shape = Shape{1};
  d.dtype = SampleDtype::f32;
  d.f32.assign(4, 0.f);
  const TargetScale t = target_statistics(d);
  REQUIRE(t.mean[0] == Approx(3.0));
  REQUIRE(t.std[0] == Approx(std::sqrt((4.0 + 1.0 + 0.0 + 9.0) / 4.0)));  // ddof 0, as StandardScaler
  REQUIRE(t.mean[1] == Approx(7.0));
  REQUIRE(t.std[1] == 1.0);
  standardize_targets(d, t, "data.train");
  REQUIRE(d.targets[1] == 0.f);
  REQUIRE(d.targets[6] == Approx((6.0 - 3.0) / t.std[0]));
  std::vector<float> back = d.targets;
  to_target_units(back.data(), 4, t);
  const std::vector<float> original{1, 7, 2, 7, 3, 7, 6, 7};
  for (size_t i = 0; i < back.size(); ++i) REQUIRE(back[i] == Approx(original[i]));
  Dataset wide = d;
  wide.target_width = 1;
  REQUIRE_THROWS_WITH(
      standardize_targets(wide, t, "data.validation"),
      Contains("data.validation: its samples have 1 target values, data.target_statistics has 2"));
}

TEST_CASE("normalize_targets goes with a regression loss, and target_statistics with normalize_targets",
          "[config][values]") {
  const std::string base = R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 1}]
loss: mse
data:
  train: {format: random, samples: 40}
  batch_size: 8
  normalize_targets: true
)";
  REQUIRE_NOTHROW(parse_config(base, "t.yaml", {}));
  std::string bce = base;
  bce.replace(bce.find("loss: mse"), 9, "loss: binary_cross_entropy");
  REQUIRE_THROWS_WITH(parse_config(bce, "t.yaml", {}),
                      Contains("t.yaml:8:22: data.normalize_targets: goes with a regression loss (mse, mae, "
                               "huber); loss binary_cross_entropy takes 0/1 targets"));
  REQUIRE_THROWS_WITH(
      parse_config(base, "t.yaml",
                   {"data.normalize_targets=false", "data.target_statistics={mean: [1], std: [2]}"}),
      Contains("data.target_statistics: is learned with normalize_targets: true"));
  REQUIRE_THROWS_WITH(parse_config(base, "t.yaml", {"data.target_statistics={mean: [1], std: [0]}"}),
                      Contains("data.target_statistics.std"));
  REQUIRE_THROWS_WITH(parse_config(base, "t.yaml", {"data.target_statistics={mean: [1, 2], std: [1]}"}),
                      Contains("needs one value per mean"));
}

TEST_CASE("fit, eval, predict and export with normalize_targets work in the targets' units",
          "[fit][values][e2e]") {
  const std::string dir = test::temp_dir("normalize_targets");
  // y = 1000 (x1 + 2 x2) + 5000 + noise: targets of about 5000 +- 2000.
  std::ostringstream csv;
  csv << std::setprecision(10) << "x1,x2,y\n";
  uint32_t state = 12345;
  const auto uniform = [&state] {
    state = state * 1664525u + 1013904223u;
    return double(state >> 8) / double(1u << 24) - 0.5;
  };
  double sum_y = 0;
  std::vector<double> ys;
  for (int i = 0; i < 400; ++i) {
    const double x1 = 2 * uniform(), x2 = 2 * uniform(), y = 1000 * (x1 + 2 * x2) + 5000 + 20 * uniform();
    csv << x1 << "," << x2 << "," << y << "\n";
    ys.push_back(y);
    sum_y += y;
  }
  test::write_file(dir, "t.csv", csv.str());
  test::write_file(dir, "t.yaml",
                   std::string(R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 16}, {type: relu}, {type: dense, units: 1}]
loss: mse
optimizer: {type: adam, lr: 0.01}
metrics: [mae, rmse, r2]
data:
  train: {format: csv, header: true, label_column: y, path: )") +
                       dir + R"(/t.csv}
  batch_size: 20
  normalize_targets: true
train: {epochs: 30, seed: 1}
)");
  const auto fit = test::run_trainer("fit " + dir + "/t.yaml --out " + dir + "/run");
  INFO(fit.err);
  REQUIRE(fit.exit_code == 0);
  // The statistics of the training rows (all of them here), recorded for eval, predict and export.
  const std::string config = test::slurp(dir + "/run/config.yaml");
  REQUIRE_THAT(config, Contains("normalize_targets: true") && Contains("target_statistics:"));
  const Config recorded = load_config(dir + "/run/config.yaml", {});
  const TargetScale t = recorded_target_scale(recorded);
  REQUIRE(t.on());
  REQUIRE(t.mean[0] == Approx(sum_y / 400).epsilon(1e-6));  // float32 targets, summed in double
  // Metrics in the targets' units: eval on the training rows against predict's values.
  const auto eval = test::run_trainer("eval " + dir + "/run --split train");
  INFO(eval.out << eval.err);
  REQUIRE(eval.exit_code == 0);
  const double mae = value_after(eval.out, "mae"), r2 = value_after(eval.out, "r2");
  REQUIRE(r2 > 0.98);
  REQUIRE(mae < 200);  // a standardized MAE would be below 1
  REQUIRE(mae > 1);
  const auto predict =
      test::run_trainer("predict " + dir + "/run --input " + dir + "/t.csv --output " + dir + "/p.csv");
  INFO(predict.err);
  REQUIRE(predict.exit_code == 0);
  std::istringstream p(test::slurp(dir + "/p.csv"));
  std::string line;
  std::getline(p, line);  // header
  double abs_sum = 0;
  size_t n = 0;
  for (; std::getline(p, line) && n < ys.size(); ++n) abs_sum += std::fabs(std::atof(line.c_str()) - ys[n]);
  REQUIRE(n == 400);
  REQUIRE(abs_sum / 400 == Approx(mae).epsilon(1e-3));  // eval prints 4 decimals
  // predict with the plain config cannot know the statistics.
  const auto plain = test::run_trainer("predict " + dir + "/t.yaml --weights " + dir + "/run --input " + dir +
                                       "/t.csv --output " + dir + "/q.csv");
  REQUIRE(plain.exit_code == 3);
  REQUIRE_THAT(plain.err, Contains("predict with the run directory (trainer predict RUN)"));
  // The ONNX export adds the `values` output (scripts/onnx_check.sh compares it with predict).
  const auto onnx = test::run_trainer("export " + dir + "/run --format onnx --out " + dir + "/m.onnx");
  INFO(onnx.err);
  REQUIRE(onnx.exit_code == 0);
  REQUIRE_THAT(onnx.out, Contains("outputs: output, values"));
}
