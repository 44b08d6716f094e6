// The losses on float targets (lib/losses, kernels/cpu/value_loss_cpu.cc): each against a float64
// reference written from PyTorch's definitions, its gradient against finite differences, its
// metric sums against hand counts; the metrics they give; and fit end to end on each task.
// Finite differences: h = 1e-3 in float, |analytic - numeric| <= 1e-4 + 1e-3 |numeric|.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_ops.h"
#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/losses/losses.h"
#include "lib/metrics/metrics.h"
#include "lib/train/fit.h"
#include "tests/loss_rows.h"
#include "tests/test_loss.h"
#include "tests/test_util.h"

using namespace trainer;

namespace {

struct Case {
  Case(std::string n, ValueLoss f, float d = 1.f, float s = 1.f, std::vector<float> pw = {})
      : name(std::move(n)), formula(f), delta(d), scale(s), pos_weight(std::move(pw)) {}
  std::string name;
  ValueLoss formula;
  float delta = 1.f, scale = 1.f;
  std::vector<float> pos_weight;
};

// PyTorch's formulas, mean over all B * K elements, in long double: the loss conformance table's
// reference (tests/loss_rows.h), for this file's cases.
long double reference(const Case& c, const std::vector<float>& o, const std::vector<float>& y, int64_t K) {
  const test::LossRow::Ref ref = c.formula == ValueLoss::mse     ? test::LossRow::mse
                                 : c.formula == ValueLoss::mae   ? test::LossRow::mae
                                 : c.formula == ValueLoss::huber ? test::LossRow::huber
                                                                 : test::LossRow::bce;
  const test::LossRow row(c.name, c.name, ref, 0, {}, c.delta, c.scale,
                          std::vector<double>(c.pos_weight.begin(), c.pos_weight.end()));
  test::LossBatch b;
  b.values = y;
  return test::reference_loss(row, o, b, int64_t(o.size()) / K, K, false);
}

struct Run {
  std::vector<float> dout, sums;
  float loss_sum = 0;
};

Run run_cpu(const Case& c, const std::vector<float>& o, const std::vector<float>& y, int64_t B, int64_t K) {
  LossSpec s;
  s.type = c.formula == ValueLoss::bce_logits ? "binary_cross_entropy" : "mse";  // the values' kernel
  s.target = TargetKind::values;
  s.formula = c.formula;
  s.width = K;
  s.max_batch = B;
  s.delta = c.delta;
  s.scale = c.scale;
  s.pos_weight = c.pos_weight;
  s.binary_metrics = c.formula == ValueLoss::bce_logits;
  CpuBackend be;
  test::TestLoss k(be, s, B);
  Run r;
  r.dout.resize(o.size());
  r.sums.assign(size_t(s.metric_floats()), 0.f);
  k.run(o.data(), y.data(), B, r.dout.data(), &r.loss_sum, r.sums.data());
  return r;
}

std::vector<Case> cases() {
  return {{"mse", ValueLoss::mse},
          {"mae", ValueLoss::mae},
          {"huber delta 0.7", ValueLoss::huber, 0.7f},
          {"smooth_l1 beta 0.5", ValueLoss::huber, 0.5f, 2.f},
          {"bce", ValueLoss::bce_logits},
          {"bce pos_weight per output", ValueLoss::bce_logits, 1.f, 1.f, {2.f, 0.5f, 1.f}},
          {"bce pos_weight 3", ValueLoss::bce_logits, 1.f, 1.f, {3.f}}};
}

}  // namespace

TEST_CASE("losses on values match a float64 reference and finite differences", "[loss][values][gradient]") {
  const int64_t B = 5, K = 3;
  for (const Case& c : cases()) {
    INFO(c.name);
    std::vector<float> o = test::random_vector(size_t(B * K), 11, -3.f, 3.f);
    std::vector<float> y = test::random_vector(size_t(B * K), 12, -2.f, 2.f);
    if (c.formula == ValueLoss::bce_logits)
      for (float& v : y) v = v > 0 ? 1.f : 0.f;
    const Run r = run_cpu(c, o, y, B, K);
    // loss_sum is the sum over rows of each row's mean: / B is the mean over every element.
    REQUIRE(double(r.loss_sum) / B == Approx(double(reference(c, o, y, K))).epsilon(1e-6));
    for (size_t i = 0; i < o.size(); ++i) {
      // mae and huber have kinks: keep away from them so the difference quotient is the slope.
      const float e = o[i] - y[i];
      if (c.formula == ValueLoss::mae && std::abs(e) < 2e-3f) continue;
      if (c.formula == ValueLoss::huber && std::abs(std::abs(e) - c.delta) < 2e-3f) continue;
      const float h = 1e-3f;
      auto up = o, down = o;
      up[i] += h;
      down[i] -= h;
      const double numeric = double(reference(c, up, y, K) - reference(c, down, y, K)) / (2 * double(h));
      INFO("element " << i);
      REQUIRE(std::abs(double(r.dout[i]) - numeric) <= 1e-4 + 1e-3 * std::abs(numeric));
    }
  }
}

TEST_CASE("bce on logits stays finite where the naive formula overflows", "[loss][values]") {
  const Case c{"bce", ValueLoss::bce_logits};
  const std::vector<float> o{100.f, -100.f, 80.f}, y{0.f, 1.f, 1.f};
  const Run r = run_cpu(c, o, y, 3, 1);
  REQUIRE(std::isfinite(r.loss_sum));
  REQUIRE(double(r.loss_sum) / 3 == Approx((100.0 + 100.0 + 0.0) / 3).epsilon(1e-6));
  REQUIRE(r.dout[0] == Approx(1.0 / 3));
  REQUIRE(r.dout[1] == Approx(-1.0 / 3));
}

TEST_CASE("regression sums give mae, rmse and r2 as scikit-learn computes them", "[metrics][values]") {
  const std::vector<float> o{1.f, 2.f, 4.f, 3.f}, y{1.5f, 2.f, 3.f, 5.f};  // one output
  const Run r = run_cpu({"mse", ValueLoss::mse}, o, y, 4, 1);
  MetricSums s;
  s.samples = 4;
  s.loss_sum = r.loss_sum;
  s.confusion.assign(r.sums.begin(), r.sums.end());
  const auto m = compute_metrics(s, {{"mae", 1}, {"rmse", 1}, {"r2", 1}, {"mse", 1}}, 1, Task::regression);
  // errors -0.5, 0, 1, -2: mae 0.875, mse 1.3125; mean y 2.875, SST 7.1875, r2 = 1 - 5.25 / 7.1875
  REQUIRE(m[1].second == Approx(0.875));
  REQUIRE(m[2].second == Approx(std::sqrt(1.3125)));
  REQUIRE(m[3].second == Approx(1.0 - 5.25 / 7.1875));
  REQUIRE(m[4].second == Approx(1.3125));
  REQUIRE(m[0].second == Approx(1.3125));  // the loss is the mse
}

TEST_CASE("binary sums count decisions at logit 0 and give precision, recall, f1 and auc",
          "[metrics][values]") {
  // two labels; label 0: logits 2, -1, 0.5, -3 for targets 1, 1, 0, 0 -> TP 1, FN 1, FP 1, TN 1
  // label 1: logits 1, 2, -1, -2 for 1, 1, 0, 0 -> all right, AUC 1
  const std::vector<float> o{2.f, 1.f, -1.f, 2.f, 0.5f, -1.f, -3.f, -2.f};
  const std::vector<float> y{1.f, 1.f, 1.f, 1.f, 0.f, 0.f, 0.f, 0.f};
  const Run r = run_cpu({"bce", ValueLoss::bce_logits}, o, y, 4, 2);
  REQUIRE(r.sums[0] == 1.f);  // label 0: TP, FP, FN, TN
  REQUIRE(r.sums[1] == 1.f);
  REQUIRE(r.sums[2] == 1.f);
  REQUIRE(r.sums[3] == 1.f);
  REQUIRE(r.sums[size_t(kBinarySums)] == 2.f);  // label 1: TP 2
  REQUIRE(r.sums[size_t(kBinarySums) + 3] == 2.f);
  MetricSums s;
  s.samples = 4;
  s.confusion.assign(r.sums.begin(), r.sums.end());
  const auto m = compute_metrics(
      s, {{"accuracy", 1}, {"precision", 1}, {"recall", 1}, {"f1", 1}, {"macro_f1", 1}, {"auc", 1}}, 2,
      Task::multilabel);
  REQUIRE(m[1].second == Approx(6.0 / 8));  // accuracy over every decision
  REQUIRE(m[2].second == Approx(3.0 / 4));  // micro precision: TP 3 of 4 positive decisions
  REQUIRE(m[3].second == Approx(3.0 / 4));  // micro recall
  REQUIRE(m[5].second == Approx((0.5 + 1.0) / 2));
  // label 0's AUC by pairs: positives 2, -1 against negatives 0.5, -3: (1 + 1 + 0 + 1) / 4 = 0.75
  REQUIRE(m[6].second == Approx((0.75 + 1.0) / 2));
  const std::string report = format_class_report(s, 2, {"a", "b"}, Task::multilabel);
  REQUIRE(report.find("macro") != std::string::npos);
}

TEST_CASE("histogram auc equals the pairwise auc up to scores that share a bin", "[metrics][values]") {
  std::vector<float> pos(kAucBins, 0.f), neg(kAucBins, 0.f);
  const std::vector<float> logits = test::random_vector(400, 3, -4.f, 4.f);
  std::vector<float> pl, nl;
  for (size_t i = 0; i < logits.size(); ++i) {
    const bool positive = (i % 3 == 0) ? logits[i] > -1.f : logits[i] > 1.5f;  // informative, imperfect
    (positive ? pos : neg)[size_t(auc_bin(logits[i]))] += 1;
    (positive ? pl : nl).push_back(logits[i]);
  }
  double pairs = 0;
  for (float a : pl)
    for (float b : nl) pairs += a > b ? 1.0 : (a == b ? 0.5 : 0.0);
  pairs /= double(pl.size() * nl.size());
  REQUIRE(histogram_auc(pos.data(), neg.data()) == Approx(pairs).margin(0.01));
  std::vector<float> none(kAucBins, 0.f);
  REQUIRE(std::isnan(histogram_auc(none.data(), neg.data())));
}

namespace {

std::string task_yaml(const std::string& loss, int64_t outputs, const std::string& extra = "") {
  return "model:\n  input_shape: [8]\n  layers: [{type: dense, units: 32}, {type: relu}, {type: dense, "
         "units: " +
         std::to_string(outputs) + "}]\nloss: " + loss +
         "\noptimizer: {type: adam, lr: 0.01}\ndata: {train: {format: random, samples: 1200, seed: 3}, "
         "batch_size: 32, validation_split: 0.25" +
         extra + "}\ntrain: {epochs: 12, seed: 1}\n";
}

std::map<std::string, double> fit_metrics(const std::string& yaml, std::string* log = nullptr) {
  Config cfg = parse_config(yaml, "task.yaml", {});
  std::ostringstream out;
  fit(cfg, FitOptions{}, out);
  if (log) *log = out.str();
  // The last epoch line: "... val_loss=0.1 val_mae=0.2 ..."
  const std::string text = out.str();
  const size_t at = text.rfind("epoch 12/12");
  REQUIRE(at != std::string::npos);
  std::istringstream line(text.substr(at, text.find('\n', at) - at));
  std::map<std::string, double> m;
  for (std::string word; line >> word;) {
    const size_t eq = word.find('=');
    if (eq != std::string::npos && word.find("time") != 0)
      m[word.substr(0, eq)] = std::atof(word.c_str() + eq + 1);
  }
  return m;
}

}  // namespace

TEST_CASE("fit learns a regression on random linear data with mse", "[fit][values][e2e]") {
  std::string log;
  const auto m = fit_metrics(task_yaml("mse", 2), &log);
  INFO(log);
  REQUIRE(m.count("val_r2"));
  REQUIRE(m.at("val_r2") > 0.9);  // targets are linear in the features plus 0.1 noise
  REQUIRE(m.at("val_rmse") < 0.35);
  REQUIRE(log.find("r2") != std::string::npos);  // the end-of-fit report per output
}

TEST_CASE("fit learns binary and multi-label tasks with binary_cross_entropy", "[fit][values][e2e]") {
  const auto binary = fit_metrics(task_yaml("binary_cross_entropy", 1));
  REQUIRE(binary.at("val_accuracy") > 0.9);
  REQUIRE(binary.at("val_auc") > 0.95);
  const auto multi = fit_metrics(task_yaml("{type: binary_cross_entropy, pos_weight: 1.5}", 3));
  REQUIRE(multi.at("val_accuracy") > 0.88);
  REQUIRE(multi.at("val_f1") > 0.85);
}

TEST_CASE("huber, mae and smooth_l1 train too", "[fit][values]") {
  for (const char* loss : {"{type: huber, delta: 0.5}", "mae", "{type: smooth_l1, beta: 0.5}"}) {
    INFO(loss);
    REQUIRE(fit_metrics(task_yaml(loss, 1)).at("val_r2") > 0.85);
  }
}

TEST_CASE("a loss's task decides which metrics a config may name", "[config][values]") {
  REQUIRE_THROWS_WITH(parse_config(task_yaml("mse", 1) + "metrics: [accuracy]\n", "t.yaml", {}),
                      Catch::Contains("metrics.0.type") && Catch::Contains("mae, mse, rmse, r2"));
  REQUIRE_THROWS_WITH(
      parse_config(task_yaml("binary_cross_entropy", 1) + "metrics: [top_k_accuracy]\n", "t.yaml", {}),
      Catch::Contains("auc"));
  const Config c = parse_config(task_yaml("mse", 1), "t.yaml", {});
  REQUIRE(c.metrics.size() == 3);  // regression's defaults: mae, rmse, r2
  REQUIRE(c.loss_config.task(1) == Task::regression);
  REQUIRE_THROWS_WITH(parse_config(task_yaml("{type: huber, delta: -1}", 1), "t.yaml", {}),
                      Catch::Contains("loss.delta"));
  REQUIRE_THROWS_WITH(parse_config(task_yaml("msee", 1), "t.yaml", {}), Catch::Contains("mse"));
}

TEST_CASE("binary targets outside 0 and 1 and a wrong target width are data errors", "[values][data]") {
  // csv labels 0..2 for a binary loss: the value 2 is named
  const std::string dir = test::temp_dir("value_targets");
  {
    std::ofstream f(dir + "/d.csv");
    f << "1,2,0\n3,4,1\n5,6,2\n";
  }
  const std::string yaml =
      "model: {input_shape: [2], layers: [{type: dense, units: 1}]}\nloss: binary_cross_entropy\n"
      "data: {train: {format: csv, path: " +
      dir + "/d.csv}, batch_size: 2}\ntrain: {epochs: 1}\n";
  std::ostringstream out;
  REQUIRE_THROWS_WITH(fit(parse_config(yaml, "b.yaml", {}), FitOptions{}, out),
                      Catch::Contains("sample 2") && Catch::Contains("0 or 1"));
}

TEST_CASE("class_weights scale each sample's loss and gradient by its class's weight, as Keras",
          "[loss][gradient]") {
  const int64_t B = 6, C = 4;
  const std::vector<int32_t> y{0, 3, 1, 1, 2, 3};
  const std::vector<float> w{0.5f, 2.f, 1.f, 3.f};
  for (ClassScores kind : {ClassScores::log_probabilities, ClassScores::logits, ClassScores::probabilities}) {
    for (float smoothing : {0.f, 0.1f}) {
      INFO("kind " << int(kind) << " smoothing " << smoothing);
      std::vector<float> out = test::random_vector(size_t(B * C), 9, -2.f, 2.f);
      if (kind == ClassScores::log_probabilities)
        for (auto& v : out) v = -std::abs(v) - 0.1f;
      if (kind == ClassScores::probabilities)
        for (auto& v : out) v = 0.05f + 0.9f * (v + 2.f) / 4.f;
      std::vector<float> d(out.size()), dw(out.size());
      float plain = 0, weighted = 0;
      cpu::classification_loss(kind, out.data(), y.data(), B, C, d.data(), &plain, smoothing);
      cpu::classification_loss(kind, out.data(), y.data(), B, C, dw.data(), &weighted, smoothing, w.data());
      // row by row: the unweighted kernel on one row, times the weight
      double expect = 0;
      for (int64_t i = 0; i < B; ++i) {
        std::vector<float> row(out.begin() + i * C, out.begin() + (i + 1) * C);
        std::vector<float> dr(static_cast<size_t>(C));
        float one = 0;
        cpu::classification_loss(kind, row.data(), &y[size_t(i)], 1, C, dr.data(), &one, smoothing);
        expect += double(w[size_t(y[size_t(i)])]) * one;
        for (int64_t c = 0; c < C; ++c)  // one row's gradient is B times a batch row's
          REQUIRE(dw[size_t(i * C + c)] == Approx(w[size_t(y[size_t(i)])] * dr[size_t(c)] / B).margin(1e-7));
      }
      REQUIRE(weighted == Approx(expect).epsilon(1e-6));
      // all weights 1 gives the unweighted bits exactly
      const std::vector<float> ones(size_t(C), 1.f);
      std::vector<float> d1(out.size());
      float one_sum = 0;
      cpu::classification_loss(kind, out.data(), y.data(), B, C, d1.data(), &one_sum, smoothing, ones.data());
      REQUIRE(one_sum == plain);
      REQUIRE(d1 == d);
    }
  }
}

TEST_CASE("loss.class_weights trains weighted and validates unweighted", "[loss][fit]") {
  const std::string yaml =
      "model: {input_shape: [2], layers: [{type: dense, units: 8}, {type: relu}, {type: dense, units: 2}]}\n"
      "loss: {type: cross_entropy, class_weights: [1.0, 5.0]}\noptimizer: {type: sgd, lr: 0.1}\n"
      "data: {train: {format: disc, samples: 400, seed: 1}, validation: {format: disc, samples: 200, seed: "
      "1}, "
      "num_classes: 2, batch_size: 50}\ntrain: {epochs: 2, seed: 3}\n";
  std::ostringstream out;
  const FitResult weighted = fit(parse_config(yaml, "cw.yaml", {}), FitOptions{}, out);
  const FitResult plain =
      fit(parse_config(yaml, "cw.yaml", {"loss.class_weights=[1.0, 1.0]"}), FitOptions{}, out);
  const FitResult none =
      fit(parse_config(yaml, "cw.yaml", {"loss={type: cross_entropy}"}), FitOptions{}, out);
  REQUIRE(plain.final_train_loss == none.final_train_loss);  // weights of 1 change nothing
  REQUIRE(weighted.final_train_loss != none.final_train_loss);
  // the same data as training, unweighted in validation: the training loss carries the weights
  REQUIRE_THROWS_WITH(
      fit(parse_config(yaml, "cw.yaml", {"loss.class_weights=[1.0, 2.0, 3.0]"}), FitOptions{}, out),
      Catch::Contains("3 values for 2 classes"));
  REQUIRE_THROWS_WITH(parse_config(yaml, "cw.yaml", {"loss.class_weights=[1.0, -2.0]"}),
                      Catch::Contains("loss.class_weights"));
}
