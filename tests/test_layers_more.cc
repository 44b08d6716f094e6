// Behaviour of the layers that the conformance table (tests/conformance/) does not check:
// dropout's keep rate, dropout2d's channels, shape and key validation, the mlp macro, and the
// kernels reading the Model's slots and updating its buffers through the Executor. Every
// layer's forward against a float64 reference and its backward against finite differences are
// rows of that table.
#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "lib/core/error.h"
#include "lib/layers/batchnorm.h"
#include "lib/model/arena_layout.h"
#include "lib/model/executor.h"
#include "lib/model/model.h"
#include "tests/conformance/harness.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;

namespace {

void require_close(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("element " << i << " got " << got[i] << " want " << want[i]);
    REQUIRE(std::abs(got[i] - want[i]) <= 1e-4 * (1 + std::abs(want[i])));
  }
}

// One training forward of a layer on the CPU through the conformance harness.
struct Forward {
  conformance::CaseData data;
  conformance::RunOutput out;
  Forward(const std::string& yaml, const Shape& in, int64_t batch, uint64_t seed) {
    conformance::Case c;
    c.yaml = yaml;
    c.input = in;
    c.batch = batch;
    c.seed = seed;
    data = conformance::make_case_data(c);
    conformance::KernelRun k(conformance::cpu_backend(), data);
    out = k.run(true);
  }
};

}  // namespace

TEST_CASE("dropout keeps about 1-rate of the units and scales them by 1/(1-rate)", "[layers]") {
  Forward f("{type: dropout, rate: 0.3}", Shape{1000}, 4, 61);
  int kept = 0;
  for (size_t i = 0; i < f.out.y.size(); ++i) {
    if (f.out.y[i] != 0.f) {
      ++kept;
      REQUIRE(f.out.y[i] == Approx(f.data.x[i] / 0.7f));
    }
  }
  REQUIRE(kept / 4000.0 == Approx(0.7).margin(0.03));
}

TEST_CASE("dropout2d keeps about 1-rate of the channels", "[layers]") {
  Forward f("{type: dropout2d, rate: 0.5}", Shape{64, 2, 2}, 8, 62);
  int kept = 0;
  for (size_t plane = 0; plane < 8 * 64; ++plane) kept += f.out.y[plane * 4] != 0.f;
  REQUIRE(kept / 512.0 == Approx(0.5).margin(0.07));
}

TEST_CASE("the new layers validate their shapes and keys", "[config][shapes]") {
  REQUIRE_THROWS_WITH(test::make_layer("{type: conv1d, filters: 2, kernel_size: 3}", Shape{1, 4, 4}),
                      Contains("expects (channels, length)") && Contains("(None, 1, 4, 4)"));
  REQUIRE_THROWS_WITH(test::make_layer("{type: conv1d, filters: 2, kernel_size: 9}", Shape{1, 4}),
                      Contains("does not fit input (None, 1, 4)"));
  REQUIRE_THROWS_WITH(test::make_layer("{type: conv1d, filters: 2, kernel_size: [3, 3]}", Shape{1, 8}),
                      Contains("layer.kernel_size") && Contains("1-D layers take one size"));
  REQUIRE_THROWS_WITH(test::make_layer("{type: embedding, output_dim: 4}", Shape{5}),
                      Contains("input_dim") && Contains("is required"));
  REQUIRE_THROWS_WITH(test::make_layer("{type: embedding, input_dim: 9, output_dim: 4}", Shape{2, 5}),
                      Contains("sequence of token ids"));
  REQUIRE_THROWS_WITH(test::make_layer("{type: global_avg_pool}", Shape{8}),
                      Contains("expects (channels, length)"));
  REQUIRE_THROWS_WITH(test::make_layer("{type: maxpool1d, pool_size: 4}", Shape{2, 3}),
                      Contains("does not fit"));
  REQUIRE_THROWS_WITH(test::make_layer("{type: batchnorm, momentum: 2}", Shape{3}),
                      Contains("layer.momentum") && Contains("out of range"));
  auto emb = test::make_layer("{type: embedding, input_dim: 6, output_dim: 4}", Shape{5});
  REQUIRE(emb->output_shape() == Shape{4, 5});  // channels first
  REQUIRE(emb->num_params() == 24);
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
  REQUIRE_THROWS_WITH(model("{type: mlp, final_units: 2}"),
                      Contains("model.layers.0.depth") && Contains("is required"));
  REQUIRE_THROWS_WITH(model("{type: mlp, depth: 3, final_units: 2, widht: 8}"),
                      Contains("model.layers.0") && Contains("did you mean 'width'"));
  REQUIRE_THROWS_WITH(model("{type: mlp, depth: 3, final_units: 2, activation: softmax}"),
                      Contains("activation"));
}

TEST_CASE("the kernels read the Model's parameter slots and update its buffers through the Executor",
          "[model][layout]") {
  // conv1d (bias in the slot after the weight) -> batchnorm (beta after gamma; running stats)
  // -> global_avg_pool: (2, 9) -> (3).
  const YAML::Node layers =
      YAML::Load("[{type: conv1d, filters: 3, kernel_size: 3}, {type: batchnorm}, {type: global_avg_pool}]");
  Model model(Shape{2, 9}, layers, InitScheme::torch, "test");
  REQUIRE(model.params().size() == 4);
  for (size_t k = 0; k + 1 < model.params().size(); ++k)
    if (model.params()[k].layer == model.params()[k + 1].layer)
      REQUIRE(size_t(model.params()[k + 1].offset - model.params()[k].offset) * sizeof(float) ==
              align_up(size_t(model.params()[k].shape.numel()) * sizeof(float)));
  CpuBackend backend;
  OptimizerConfig oc;
  Optimizer opt(oc);
  Executor ex(model, backend, opt, test::classifier_options({2}, 3));
  std::vector<float> p(size_t(model.param_arena_floats())), buf(size_t(model.buffer_arena_floats()));
  model.initialize(p.data(), buf.data(), 3);
  for (const TensorSlot& s : model.params())  // distinct values everywhere, padding included
    for (int64_t i = 0; i < s.shape.numel(); ++i)
      p[size_t(s.offset + i)] = 0.1f * float(i % 7) - 0.2f + 0.05f * float(s.layer);
  // The running statistics' slots in the buffer arena (each aligned, as every arena's tensors).
  REQUIRE(model.buffers().size() == 2);
  const size_t rm = size_t(model.buffers()[0].offset), rv = size_t(model.buffers()[1].offset);
  REQUIRE(model.buffers()[1].name == "batchnorm_1.running_var");
  REQUIRE(rv * sizeof(float) % kArenaAlign == 0);
  for (size_t c = 0; c < 3; ++c) buf[rm + c] = 0.1f * float(c), buf[rv + c] = 1.f + 0.5f * float(c);
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
  const float *gamma = slot("batchnorm_1.weight"), *beta = slot("batchnorm_1.bias");
  std::vector<double> ref;
  for (int n = 0; n < 2; ++n)
    for (int f = 0; f < 3; ++f) {
      double mean = 0;
      for (int o = 0; o < 7; ++o) {
        double acc = b[f];
        for (int c = 0; c < 2; ++c)
          for (int j = 0; j < 3; ++j)
            acc += double(x[size_t((n * 2 + c) * 9 + o + j)]) * w[(f * 2 + c) * 3 + j];
        mean += acc / 7.0;
      }
      ref.push_back(gamma[f] * (mean - buf[rm + size_t(f)]) / std::sqrt(buf[rv + size_t(f)] + 1e-5) +
                    beta[f]);
    }
  require_close(out, ref);
  // A training step moves the running statistics in the buffer arena.
  const int32_t labels[2] = {0, 2};
  ex.train_step(2, x.data(), labels, 1, 0.01f);
  std::vector<float> p2(p.size()), buf2(buf.size());
  ex.download_params(p2.data(), buf2.data());
  for (size_t c = 0; c < 3; ++c) {
    REQUIRE(buf2[rm + c] != buf[rm + c]);
    REQUIRE(buf2[rv + c] != buf[rv + c]);
  }
}
