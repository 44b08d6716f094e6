// Model::initialize draws large tensors on several threads (pieces of 2^20 values, each thread
// skipping the counter stream to its piece): the weights must be the bits one sequential loop
// over the same stream gives, tensor after tensor, for the normal draws (gpt2 and torch
// embeddings) and the uniform ones (torch and keras bounds), across piece boundaries.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "lib/config/config.h"
#include "lib/core/rng.h"
#include "lib/model/model.h"

using namespace trainer;

namespace {

// The draws as Model::initialize documents them, one value after another.
std::vector<float> sequential(const Model& m, uint64_t seed, bool gpt2) {
  std::vector<float> w(size_t(m.param_arena_floats()), 0.f);
  SplitMix64 rng = SplitMix64::counter(seed ^ 0x1A17u);
  const auto normal = [](SplitMix64& r) {
    const double u1 = std::max(r.uniform(), 1e-300), u2 = r.uniform();
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
  };
  for (const TensorSlot& s : m.params()) {
    float* p = w.data() + s.offset;
    const int64_t n = s.shape.numel();
    if (gpt2) {
      if (s.spec.role == ParamRole::bias) continue;
      for (int64_t i = 0; i < n; ++i) p[i] = float(0.02 * normal(rng));
    } else if (s.spec.role == ParamRole::embedding) {
      for (int64_t i = 0; i < n; ++i) p[i] = float(normal(rng));
    } else {
      const double bound = 1.0 / std::sqrt(double(s.spec.fan_in));  // torch: weight and bias
      for (int64_t i = 0; i < n; ++i) p[i] = float((2 * rng.uniform() - 1) * bound);
    }
  }
  return w;
}

}  // namespace

TEST_CASE("model initialization on several threads gives one loop's bits", "[init]") {
  for (const char* init : {"gpt2", "torch"}) {
    INFO(init);
    // An embedding of 3.1M values (three pieces and a part) and a dense layer across a boundary.
    const Config c = parse_config(std::string(R"(model:
  input_shape: [8]
  init: )") + init + R"(
  layers:
    - {type: embedding, input_dim: 4099, output_dim: 768, channels_first: false}
    - {type: dense, units: 1500, per_position: true}
data: {train: {format: random}, num_classes: 4, batch_size: 2}
)",
                                  "init.yaml", {});
    const Model m(c.input_shape, c.layers, c.init, c.file);
    std::vector<float> p(size_t(m.param_arena_floats())),
        b(size_t(std::max<int64_t>(m.buffer_arena_floats(), 1)));
    m.initialize(p.data(), b.data(), 11);
    const std::vector<float> want = sequential(m, 11, std::string(init) == "gpt2");
    CHECK(p == want);
  }
}
