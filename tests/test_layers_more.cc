// The layers of issue #4 on the CPU backend: embedding, conv1d, maxpool1d/avgpool1d,
// global_avg_pool, batchnorm, and the mlp macro.
//
// 1. Gradients: every backward against central finite differences of the forward, with the
//    harness of tests/gradient_check.h as in tests/test_layer_gradients.cc (objective
//    L = sum(y * r); distinct grid inputs; pass: |analytic - numeric| <= 2e-3 + 2e-2 |numeric|).
//    Parameters are laid out the way Model lays out its arena (each tensor in a 64-float slot), so
//    the kernels' offsets are exercised too; dparam is checked on the tensors' elements.
//    batchnorm is checked in training mode (batch statistics) and in eval mode (running ones).
// 2. Forward results against naive double-precision loops (bound 1e-4 (1 + |ref|)).
// 3. Through Model + Executor: the kernels read the Model's slots and update its buffers.
#include <catch2/catch.hpp>

#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "lib/core/error.h"
#include "lib/layers/batchnorm.h"
#include "lib/layers/conv1d.h"
#include "lib/layers/pool1d.h"
#include "lib/model/executor.h"
#include "lib/model/model.h"
#include "tests/gradient_check.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;

namespace {

// The shared harness, with dparam checked on the tensors' elements (not the slots' padding).
struct Harness : test::GradientHarness {
  Harness(const std::string& yaml, const Shape& in, int64_t b, uint64_t seed)
      : GradientHarness(yaml, in, b, seed) {
    check_padding = false;
  }
};

void require_close(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << " got " << got[i] << " want " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= 1e-4 * (1 + std::abs(want[i])));
  }
}

// Integer token ids in [0, vocab) for an embedding harness.
void use_token_ids(Harness& h, int64_t vocab, uint64_t seed) {
  SplitMix rng(seed);
  for (float& v : h.x) v = float(rng.next() % uint64_t(vocab));
}

}  // namespace

TEST_CASE("embedding backward matches finite differences and gives no input gradient", "[gradient]") {
  Harness h("{type: embedding, input_dim: 9, output_dim: 3}", Shape{5}, 3, 101);
  use_token_ids(h, 9, 1);
  h.x[0] = h.x[1] = 4.f;  // a repeated id: its gradient rows must add up
  h.check_all(1e-2f, false);
}

TEST_CASE("conv1d backward matches finite differences (valid, same strided, explicit pad, no bias)", "[gradient]") {
  Harness("{type: conv1d, filters: 3, kernel_size: 3}", Shape{2, 9}, 2, 111).check_all(1e-2f);
  Harness("{type: conv1d, filters: 2, kernel_size: 4, strides: 2, padding: same}", Shape{3, 9}, 2, 112).check_all(1e-2f);
  Harness("{type: conv1d, filters: 2, kernel_size: [2], padding: 1, use_bias: false}", Shape{2, 6}, 2, 113).check_all(1e-2f);
}

TEST_CASE("maxpool1d and avgpool1d backward match finite differences", "[gradient]") {
  SECTION("max 2") { Harness("{type: maxpool1d}", Shape{2, 8}, 2, 121).check_all(1e-3f); }
  SECTION("avg 3 stride 2 same") { Harness("{type: avgpool1d, pool_size: 3, strides: 2, padding: same}", Shape{2, 8}, 2, 122).check_all(1e-2f); }
  SECTION("max 3 stride 1") { Harness("{type: maxpool1d, pool_size: 3, strides: 1}", Shape{3, 7}, 2, 123).check_all(1e-3f); }
}

TEST_CASE("global_avg_pool backward matches finite differences on 1-D and 2-D inputs", "[gradient]") {
  Harness("{type: global_avg_pool}", Shape{3, 7}, 2, 131).check_all(1e-2f);
  Harness("{type: global_avg_pool}", Shape{2, 3, 4}, 3, 132).check_all(1e-2f);
}

TEST_CASE("batchnorm backward matches finite differences in training mode", "[gradient]") {
  Harness("{type: batchnorm}", Shape{4}, 6, 141).check_all(1e-2f);
  Harness("{type: batchnorm}", Shape{3, 5}, 3, 142).check_all(1e-2f);
  Harness("{type: batchnorm, epsilon: 0.001}", Shape{2, 3, 3}, 2, 143).check_all(1e-2f);
}

TEST_CASE("batchnorm backward matches finite differences in eval mode", "[gradient]") {
  for (const Shape& s : {Shape{4}, Shape{2, 3, 3}}) {
    Harness h("{type: batchnorm}", s, 3, 151);
    const size_t C = size_t(s[0]);
    auto stats = test::random_vector(2 * C, 152, 0.5f, 1.5f);
    for (size_t c = 0; c < C; ++c) {
      h.buffers[c] = stats[c] - 1.f;          // running_mean in [-0.5, 0.5]
      h.buffers[C + c] = stats[C + c];        // running_var in [0.5, 1.5]
    }
    h.training = false;
    h.check_all(1e-2f);
  }
}

TEST_CASE("batchnorm as a first layer (no input gradient) still gives gamma and beta gradients", "[gradient]") {
  for (bool training : {true, false}) {
    Harness h("{type: batchnorm}", Shape{3, 4}, 3, 161);
    h.training = training;
    h.objective();
    h.kernel->backward(h.x.data(), h.y.data(), h.r.data(), h.dx.data());
    const std::vector<float> with_dx = h.grads;
    std::fill(h.grads.begin(), h.grads.end(), 0.f);
    h.kernel->backward(h.x.data(), h.y.data(), h.r.data(), nullptr);
    for (size_t i : h.live) REQUIRE(h.grads[i] == Approx(with_dx[i]).margin(1e-5));
  }
}

TEST_CASE("conv1d forward equals a direct 1-D convolution", "[reference]") {
  for (const char* yaml : {"{type: conv1d, filters: 4, kernel_size: 3}",
                           "{type: conv1d, filters: 3, kernel_size: 4, strides: 2, padding: same}",
                           "{type: conv1d, filters: 2, kernel_size: 3, padding: 2, use_bias: false}"}) {
    Harness h(yaml, Shape{3, 11}, 2, 171);
    const auto& c = static_cast<const Conv1d&>(*h.layer);
    const int64_t B = 2, C = 3, L = 11, F = c.filters, OL = c.output_shape()[1];
    h.kernel->forward(h.x.data(), h.y.data(), false);
    const float* w = h.params.data();
    const float* bias = w + param_slot_floats(F * C * c.k);
    std::vector<double> ref;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t f = 0; f < F; ++f)
        for (int64_t o = 0; o < OL; ++o) {
          double acc = c.use_bias ? bias[f] : 0.0;
          for (int64_t ch = 0; ch < C; ++ch)
            for (int64_t j = 0; j < c.k; ++j) {
              const int64_t i = o * c.stride - c.w.pad_begin + j;
              if (i >= 0 && i < L) acc += double(h.x[size_t((b * C + ch) * L + i)]) * w[(f * C + ch) * c.k + j];
            }
          ref.push_back(acc);
        }
    INFO(yaml);
    require_close(h.y, ref);
  }
}

TEST_CASE("maxpool1d, avgpool1d and global_avg_pool forward equal direct pooling", "[reference]") {
  for (const char* yaml : {"{type: maxpool1d, pool_size: 2}", "{type: avgpool1d, pool_size: 3, strides: 2}"}) {
    Harness h(yaml, Shape{2, 9}, 2, 181);
    const auto& p = static_cast<const Pool1d&>(*h.layer);
    h.kernel->forward(h.x.data(), h.y.data(), false);
    std::vector<double> ref;
    for (int64_t bc = 0; bc < 4; ++bc)
      for (int64_t o = 0; o < p.output_shape()[1]; ++o) {
        double mx = -1e30, sum = 0;
        for (int64_t j = 0; j < p.size; ++j) {
          const double v = h.x[size_t(bc * 9 + o * p.stride + j)];
          mx = std::max(mx, v);
          sum += v;
        }
        ref.push_back(p.kind == Pool1d::Kind::max ? mx : sum / double(p.size));
      }
    INFO(yaml);
    require_close(h.y, ref);
  }
  for (const Shape& s : {Shape{3, 10}, Shape{2, 5, 6}}) {
    Harness h("{type: global_avg_pool}", s, 2, 182);
    h.kernel->forward(h.x.data(), h.y.data(), false);
    const int64_t S = s.numel() / s[0];
    std::vector<double> ref;
    for (int64_t bc = 0; bc < 2 * s[0]; ++bc) {
      double sum = 0;
      for (int64_t i = 0; i < S; ++i) sum += h.x[size_t(bc * S + i)];
      ref.push_back(sum / double(S));
    }
    require_close(h.y, ref);
  }
}

TEST_CASE("embedding forward gathers rows channels-first and clamps out-of-range ids", "[reference]") {
  Harness h("{type: embedding, input_dim: 6, output_dim: 4}", Shape{5}, 2, 191);
  REQUIRE(h.layer->output_shape() == Shape{4, 5});
  REQUIRE(h.layer->num_params() == 24);
  h.x = {0, 5, 2, 2, 3, /**/ 1, 4, -3, 6, 1e9f};  // the last three are out of range
  h.kernel->forward(h.x.data(), h.y.data(), true);
  std::vector<double> ref;
  for (int b = 0; b < 2; ++b)
    for (int d = 0; d < 4; ++d)
      for (int l = 0; l < 5; ++l) {
        const float v = h.x[size_t(b * 5 + l)];
        const int id = v < 0 ? 0 : v > 5 ? 5 : int(v);
        ref.push_back(h.params[size_t(id * 4 + d)]);
      }
  require_close(h.y, ref);
}

TEST_CASE("batchnorm forward normalizes with batch statistics and updates the running ones like PyTorch", "[reference]") {
  Harness h("{type: batchnorm, momentum: 0.2}", Shape{2, 3}, 4, 201);
  const int64_t B = 4, C = 2, S = 3, n = B * S;
  for (int c = 0; c < C; ++c) {
    h.buffers[size_t(c)] = 0.5f;      // running_mean
    h.buffers[size_t(C + c)] = 2.f;   // running_var
  }
  h.kernel->forward(h.x.data(), h.y.data(), true);
  const float* gamma = h.params.data();
  const float* beta = gamma + param_slot_floats(C);
  std::vector<double> ref(h.y.size());
  for (int64_t c = 0; c < C; ++c) {
    double mean = 0, var = 0;
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s) mean += h.x[size_t((b * C + c) * S + s)];
    mean /= double(n);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s) var += std::pow(h.x[size_t((b * C + c) * S + s)] - mean, 2);
    var /= double(n);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s) {
        const size_t i = size_t((b * C + c) * S + s);
        ref[i] = gamma[c] * (h.x[i] - mean) / std::sqrt(var + 1e-5) + beta[c];
      }
    REQUIRE(h.buffers[size_t(c)] == Approx(0.8 * 0.5 + 0.2 * mean).margin(1e-6));
    REQUIRE(h.buffers[size_t(C + c)] == Approx(0.8 * 2.0 + 0.2 * var * n / (n - 1)).epsilon(1e-5));
  }
  require_close(h.y, ref);
  // Eval: the running statistics, and no update.
  const std::vector<float> running(h.buffers.begin(), h.buffers.begin() + 2 * C);
  h.kernel->forward(h.x.data(), h.y.data(), false);
  for (size_t i = 0; i < ref.size(); ++i) {
    const size_t c = (i / size_t(S)) % size_t(C);
    ref[i] = gamma[c] * (h.x[i] - running[c]) / std::sqrt(running[C + c] + 1e-5) + beta[c];
  }
  require_close(h.y, ref);
  REQUIRE(std::vector<float>(h.buffers.begin(), h.buffers.begin() + 2 * C) == running);
}

TEST_CASE("the new layers validate their shapes and keys", "[config][shapes]") {
  REQUIRE_THROWS_WITH(test::make_layer("{type: conv1d, filters: 2, kernel_size: 3}", Shape{1, 4, 4}),
                      Contains("expects (channels, length)") && Contains("(None, 1, 4, 4)"));
  REQUIRE_THROWS_WITH(test::make_layer("{type: conv1d, filters: 2, kernel_size: 9}", Shape{1, 4}),
                      Contains("does not fit input (None, 1, 4)"));
  REQUIRE_THROWS_WITH(test::make_layer("{type: conv1d, filters: 2, kernel_size: [3, 3]}", Shape{1, 8}),
                      Contains("layer.kernel_size") && Contains("1-D layers take one size"));
  REQUIRE_THROWS_WITH(test::make_layer("{type: embedding, output_dim: 4}", Shape{5}), Contains("input_dim") && Contains("is required"));
  REQUIRE_THROWS_WITH(test::make_layer("{type: embedding, input_dim: 9, output_dim: 4}", Shape{2, 5}),
                      Contains("sequence of token ids"));
  REQUIRE_THROWS_WITH(test::make_layer("{type: global_avg_pool}", Shape{8}), Contains("expects (channels, length)"));
  REQUIRE_THROWS_WITH(test::make_layer("{type: maxpool1d, pool_size: 4}", Shape{2, 3}), Contains("does not fit"));
  REQUIRE_THROWS_WITH(test::make_layer("{type: batchnorm, momentum: 2}", Shape{3}), Contains("layer.momentum") && Contains("out of range"));
  auto bn = test::make_layer("{type: batchnorm}", Shape{6, 4, 4});
  REQUIRE(bn->num_params() == 12);
  REQUIRE(bn->buffer_specs().size() == 2);
  REQUIRE(bn->buffer_specs()[1].init == 1.f);
}

TEST_CASE("the mlp macro expands to dense layers with the sweep's parameter counts", "[model]") {
  auto model = [](const std::string& mlp) {
    return Model(Shape{2}, YAML::Load("[" + mlp + "]"), InitScheme::torch, "test");
  };
  Model m8 = model("{type: mlp, depth: 8, width: 4, final_units: 2}");
  REQUIRE(m8.num_params() == 44710);
  REQUIRE(m8.layers().size() == 15);
  REQUIRE(m8.layers()[0]->name() == "dense_1");
  REQUIRE(m8.layers()[1]->type() == "relu");
  REQUIRE(m8.layers()[12]->output_shape() == Shape{256});
  REQUIRE(m8.output_shape() == Shape{2});
  REQUIRE(model("{type: mlp, depth: 10, width: 4, final_units: 2}").num_params() == 703142);
  REQUIRE(model("{type: mlp, depth: 1, final_units: 3}").num_params() == 9);
  Model named = model("{type: mlp, name: body, depth: 3, growth: 1, activation: tanh, final_units: 2}");
  REQUIRE(named.layers()[2]->name() == "body_dense_2");
  REQUIRE(named.layers()[3]->name() == "body_tanh_2");
  REQUIRE(named.layers()[2]->output_shape() == Shape{4});
  REQUIRE_THROWS_WITH(model("{type: mlp, final_units: 2}"), Contains("model.layers.0.depth") && Contains("is required"));
  REQUIRE_THROWS_WITH(model("{type: mlp, depth: 3, final_units: 2, widht: 8}"),
                      Contains("model.layers.0") && Contains("did you mean 'width'"));
  REQUIRE_THROWS_WITH(model("{type: mlp, depth: 3, final_units: 2, activation: softmax}"), Contains("activation"));
}

TEST_CASE("the kernels read the Model's parameter slots and update its buffers through the Executor", "[model][layout]") {
  // conv1d (bias in the slot after the weight) -> batchnorm (beta after gamma; running stats)
  // -> global_avg_pool: (2, 9) -> (3).
  const YAML::Node layers = YAML::Load(
      "[{type: conv1d, filters: 3, kernel_size: 3}, {type: batchnorm}, {type: global_avg_pool}]");
  Model model(Shape{2, 9}, layers, InitScheme::torch, "test");
  REQUIRE(model.params().size() == 4);
  for (size_t k = 0; k + 1 < model.params().size(); ++k)
    if (model.params()[k].layer == model.params()[k + 1].layer)
      REQUIRE(model.params()[k + 1].offset - model.params()[k].offset ==
              param_slot_floats(model.params()[k].shape.numel()));
  CpuBackend backend;
  OptimizerConfig oc;
  Optimizer opt(oc);
  ExecutorOptions eo;
  eo.batch_sizes = {2};
  eo.num_classes = 3;
  eo.loss = LossKind::cross_entropy_logits;
  Executor ex(model, backend, opt, eo);
  std::vector<float> p(size_t(model.param_arena_floats())), buf(size_t(model.buffer_arena_floats()));
  model.initialize(p.data(), buf.data(), 3);
  for (const TensorSlot& s : model.params())  // distinct values everywhere, padding included
    for (int64_t i = 0; i < s.shape.numel(); ++i) p[size_t(s.offset + i)] = 0.1f * float(i % 7) - 0.2f + 0.05f * float(s.layer);
  for (size_t c = 0; c < 3; ++c) buf[c] = 0.1f * float(c), buf[3 + c] = 1.f + 0.5f * float(c);
  ex.upload_params(p.data(), buf.data());
  auto x = test::random_vector(36, 211);
  std::vector<float> out(6);
  ex.predict(2, x.data(), out.data());
  auto slot = [&](const std::string& name) {
    for (const TensorSlot& s : model.params())
      if (s.name == name) return p.data() + s.offset;
    FAIL("no slot " << name);
    return p.data();
  };
  const float *w = slot("conv1d_1.weight"), *b = slot("conv1d_1.bias");
  const float *gamma = slot("batchnorm_1.gamma"), *beta = slot("batchnorm_1.beta");
  std::vector<double> ref;
  for (int n = 0; n < 2; ++n)
    for (int f = 0; f < 3; ++f) {
      double mean = 0;
      for (int o = 0; o < 7; ++o) {
        double acc = b[f];
        for (int c = 0; c < 2; ++c)
          for (int j = 0; j < 3; ++j) acc += double(x[size_t((n * 2 + c) * 9 + o + j)]) * w[(f * 2 + c) * 3 + j];
        mean += acc / 7.0;
      }
      ref.push_back(gamma[f] * (mean - buf[size_t(f)]) / std::sqrt(buf[size_t(3 + f)] + 1e-5) + beta[f]);
    }
  require_close(out, ref);
  // A training step moves the running statistics in the buffer arena.
  const int32_t labels[2] = {0, 2};
  ex.train_step(2, x.data(), labels, 1, 0.01f);
  std::vector<float> p2(p.size()), buf2(buf.size());
  ex.download_params(p2.data(), buf2.data());
  for (size_t c = 0; c < 3; ++c) {
    REQUIRE(buf2[c] != buf[c]);
    REQUIRE(buf2[3 + c] != buf[3 + c]);
  }
}
