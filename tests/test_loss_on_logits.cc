// A model that ends in log_softmax under nll, or softmax under the probabilities' crossentropy,
// trains as the same model without that layer under the logits' crossentropy (the executor folds
// the layer into the loss: Executor::choose_loss_on_logits), and still predicts the layer's
// output.
#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "lib/config/config.h"
#include "lib/core/rng.h"
#include "lib/model/executor.h"
#include "tests/test_util.h"

using namespace trainer;

namespace {

constexpr int64_t kBatch = 16, kClasses = 5, kFeatures = 12;

std::string yaml(const std::string& last) {
  return "model:\n  input_shape: [12]\n  layers:\n    - {type: dense, units: 8}\n    - {type: relu}\n"
         "    - {type: dense, units: 5}\n" +
         (last.empty() ? std::string() : "    - {type: " + last + "}\n") +
         "data: {train: {format: random}, num_classes: 5}\n";
}

struct Run {
  std::vector<float> params, predictions;
  double loss = 0;
  bool folded = false;
};

// Five Adam steps on fixed random batches, then a prediction on the last batch.
Run train(const std::string& last, const std::string& loss, float smoothing) {
  Config c = parse_config(yaml(last), "logits.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  CpuBackend backend;
  Optimizer opt{OptimizerConfig{}};
  ExecutorOptions o = test::classifier_options({kBatch}, kClasses);
  o.loss = loss_config("{type: " + loss + ", label_smoothing: " + std::to_string(smoothing) + "}");
  Executor ex(model, backend, opt, o);
  Run r;
  r.folded = ex.loss_on_logits();
  std::vector<float> params(size_t(model.param_arena_floats())), buffers(1);
  model.initialize(params.data(), buffers.data(), 7);
  ex.upload_params(params.data(), buffers.data());
  SplitMix64 rng = SplitMix64::counter(3);
  std::vector<float> x(size_t(kBatch * kFeatures));
  std::vector<int32_t> y(static_cast<size_t>(kBatch));
  for (int64_t t = 1; t <= 5; ++t) {
    for (auto& v : x) v = float(rng.uniform() * 4 - 2);
    for (auto& v : y) v = int32_t(rng.next_u64() % kClasses);
    ex.train_step(kBatch, x.data(), y.data(), t, 0.05f);
  }
  r.loss = ex.read_metrics().loss_sum;
  ex.download_params(params.data(), nullptr);
  r.params = params;
  r.predictions.resize(size_t(kBatch * kClasses));
  ex.predict(kBatch, x.data(), r.predictions.data());
  return r;
}

double rel(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    d += double(a[i] - b[i]) * (a[i] - b[i]);
    n += double(b[i]) * b[i];
  }
  return std::sqrt(d / n);
}

}  // namespace

TEST_CASE("a final log_softmax under nll and a final softmax under crossentropy train as logits do",
          "[executor][loss]") {
  for (float smoothing : {0.f, 0.1f}) {
    const Run logits = train("", "cross_entropy", smoothing);
    CHECK_FALSE(logits.folded);
    for (const auto& [last, loss] : {std::pair<std::string, std::string>{"log_softmax", "nll"},
                                     {"softmax", "sparse_categorical_crossentropy"}}) {
      INFO(last << ", label smoothing " << smoothing);
      const Run folded = train(last, loss, smoothing);
      CHECK(folded.folded);
      REQUIRE(folded.params.size() == logits.params.size());
      CHECK(rel(folded.params, logits.params) < 1e-6);
      CHECK(std::abs(folded.loss - logits.loss) < 1e-5 * std::abs(logits.loss));
      // Prediction runs the layer: rows of probabilities, or of log-probabilities.
      for (int64_t b = 0; b < kBatch; ++b) {
        double sum = 0;
        for (int64_t c = 0; c < kClasses; ++c) {
          const double v = folded.predictions[size_t(b * kClasses + c)];
          sum += last == "softmax" ? v : std::exp(v);
        }
        CHECK(sum == Approx(1.0).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("a final softmax is not folded into a loss that does not undo it", "[executor][loss]") {
  // nll on probabilities (not log-probabilities) is another function: the layer must run.
  CHECK_FALSE(train("softmax", "nll", 0.f).folded);
  CHECK_FALSE(train("log_softmax", "sparse_categorical_crossentropy", 0.f).folded);
}
