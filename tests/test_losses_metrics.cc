// Loss gradients against finite differences; metric accumulators against hand-counted values.
// Loss tolerance: |analytic - numeric| <= 1e-4 + 1e-3 |numeric| with h = 1e-3, in double.
#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/cpu/cpu_ops.h"
#include "tests/test_util.h"

using namespace trainer;

static double loss_of(ClassScores kind, std::vector<float> out, const std::vector<int32_t>& y, int64_t B,
                      int64_t C) {
  std::vector<float> d(out.size());
  float sum = 0;
  cpu::classification_loss(kind, out.data(), y.data(), B, C, d.data(), &sum);
  return double(sum) / double(B);
}

TEST_CASE("loss gradients match finite differences", "[gradient][loss]") {
  const int64_t B = 4, C = 5;
  std::vector<int32_t> y{0, 3, 4, 1};
  for (ClassScores kind : {ClassScores::log_probabilities, ClassScores::logits, ClassScores::probabilities}) {
    std::vector<float> out = test::random_vector(size_t(B * C), 5, -2.f, 2.f);
    if (kind == ClassScores::log_probabilities)  // log-probabilities
      for (auto& v : out) v = -std::abs(v) - 0.1f;
    if (kind == ClassScores::probabilities)
      for (auto& v : out) v = 0.05f + 0.9f * (v + 2.f) / 4.f;
    std::vector<float> d(out.size());
    float sum = 0;
    cpu::classification_loss(kind, out.data(), y.data(), B, C, d.data(), &sum);
    for (size_t i = 0; i < out.size(); ++i) {
      const float h = 1e-3f;
      auto up = out, down = out;
      up[i] += h;
      down[i] -= h;
      double numeric = (loss_of(kind, up, y, B, C) - loss_of(kind, down, y, B, C)) / (2 * h);
      INFO("kind " << int(kind) << " element " << i);
      REQUIRE(std::abs(d[i] - numeric) <= 1e-3 + 1e-2 * std::abs(numeric));
    }
  }
}

TEST_CASE("cross entropy from logits equals nll of log_softmax", "[loss]") {
  std::vector<float> logits{1.f, 2.f, 3.f, -1.f, 0.f, 4.f};
  std::vector<int32_t> y{2, 0};
  double expected = 0;
  for (int b = 0; b < 2; ++b) {
    double z = 0;
    for (int c = 0; c < 3; ++c) z += std::exp(double(logits[size_t(b * 3 + c)]));
    expected += std::log(z) - logits[size_t(b * 3 + y[size_t(b)])];
  }
  REQUIRE(loss_of(ClassScores::logits, logits, y, 2, 3) == Approx(expected / 2).epsilon(1e-6));
}

TEST_CASE("confusion matrix and top-k count predictions", "[metrics]") {
  // 3 samples, 3 classes. argmax: 2, 0, 1. labels: 2, 1, 1.
  std::vector<float> out{0.1f, 0.2f, 0.7f, 0.5f, 0.4f, 0.1f, 0.2f, 0.6f, 0.2f};
  std::vector<int32_t> y{2, 1, 1};
  std::vector<float> m(9, 0.f);
  cpu::confusion_accumulate(out.data(), y.data(), 3, 3, m.data());
  REQUIRE(m == std::vector<float>{0, 0, 0, 1, 1, 0, 0, 0, 1});
  float top1 = 0, top2 = 0;
  cpu::topk_correct(out.data(), y.data(), 3, 3, 1, &top1);
  cpu::topk_correct(out.data(), y.data(), 3, 3, 2, &top2);
  REQUIRE(top1 == 2.f);
  REQUIRE(top2 == 3.f);
}

TEST_CASE("label smoothing is PyTorch's, and its gradients match finite differences", "[gradient][loss]") {
  // PyTorch: F.cross_entropy(tensor([[1., 2., 3.]]), tensor([0]), label_smoothing=0.1)
  // = 0.9 * 2.4076059644 + 0.1 * mean(2.4076, 1.4076, 0.4076) = 2.3076059644.
  {
    const std::vector<float> out{1.f, 2.f, 3.f};
    const std::vector<int32_t> y{0};
    std::vector<float> d(3);
    float sum = 0;
    cpu::classification_loss(ClassScores::logits, out.data(), y.data(), 1, 3, d.data(), &sum, 0.1f);
    CHECK(std::abs(double(sum) - 2.3076059644) < 1e-6);
    // The same network as log_softmax + nll.
    const double log_z = 3.4076059644;
    const std::vector<float> logp{float(1 - log_z), float(2 - log_z), float(3 - log_z)};
    float nll = 0;
    cpu::classification_loss(ClassScores::log_probabilities, logp.data(), y.data(), 1, 3, d.data(), &nll,
                             0.1f);
    CHECK(std::abs(double(nll) - 2.3076059644) < 1e-6);
  }
  const int64_t B = 4, C = 5;
  std::vector<int32_t> y{0, 3, 4, 1};
  for (ClassScores kind : {ClassScores::log_probabilities, ClassScores::logits, ClassScores::probabilities}) {
    std::vector<float> out = test::random_vector(size_t(B * C), 6, -2.f, 2.f);
    if (kind == ClassScores::log_probabilities)
      for (auto& v : out) v = -std::abs(v) - 0.1f;
    if (kind == ClassScores::probabilities)
      for (auto& v : out) v = 0.05f + 0.9f * (v + 2.f) / 4.f;
    auto loss = [&](const std::vector<float>& o) {
      std::vector<float> d(o.size());
      float sum = 0;
      cpu::classification_loss(kind, o.data(), y.data(), B, C, d.data(), &sum, 0.2f);
      return double(sum) / double(B);
    };
    std::vector<float> d(out.size());
    float sum = 0;
    cpu::classification_loss(kind, out.data(), y.data(), B, C, d.data(), &sum, 0.2f);
    std::vector<float> plain(out.size());
    float plain_sum = 0;
    cpu::classification_loss(kind, out.data(), y.data(), B, C, plain.data(), &plain_sum);
    CHECK(sum != plain_sum);  // smoothing changes the loss
    for (size_t i = 0; i < out.size(); ++i) {
      const float h = 1e-3f;
      auto up = out, down = out;
      up[i] += h;
      down[i] -= h;
      const double numeric = (loss(up) - loss(down)) / (2 * h);
      INFO("kind " << int(kind) << " element " << i);
      REQUIRE(std::abs(d[i] - numeric) <= 1e-3 + 1e-2 * std::abs(numeric));
    }
  }
}
