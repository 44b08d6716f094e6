// Layer hyper-parameters checked against PyTorch's own rules at config time (issue 30, item 6):
// pooling padding at most half the window; weights files with non-finite values refused on load
// (item 7).
#include <catch2/catch.hpp>
#include <fstream>
#include <limits>
#include <sstream>

#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/train/checkpointing.h"
#include "lib/train/fit.h"
#include "lib/train/session.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Matchers::Contains;

namespace {

std::string pool_yaml(const std::string& pool) {
  return "model:\n  input_shape: [1, 8, 8]\n  layers:\n    - " + pool +
         "\n    - {type: flatten}\n    - {type: dense, units: 2}\nloss: cross_entropy\n"
         "data: {train: {format: random, samples: 8}, num_classes: 2}\n";
}

}  // namespace

TEST_CASE("pooling padding above half the window is a config error, as in PyTorch", "[config][layers]") {
  for (const char* type : {"maxpool2d", "avgpool2d"}) {
    INFO(type);
    const std::string bad = std::string("{type: ") + type + ", pool_size: 2, padding: 2}";
    REQUIRE_THROWS_AS(make_model(parse_config(pool_yaml(bad), "p.yaml", {})), ConfigError);
    REQUIRE_THROWS_WITH(
        make_model(parse_config(pool_yaml(bad), "p.yaml", {})),
        Contains("model.layers.0 (") && Contains("padding 2 must be at most half of pool_size 2"));
    // pad 1 of a 2-window and of a 3-window are PyTorch's largest
    REQUIRE_NOTHROW(make_model(parse_config(
        pool_yaml(std::string("{type: ") + type + ", pool_size: 2, padding: 1}"), "p.yaml", {})));
    REQUIRE_NOTHROW(make_model(parse_config(
        pool_yaml(std::string("{type: ") + type + ", pool_size: 3, padding: 1}"), "p.yaml", {})));
    REQUIRE_THROWS_WITH(
        make_model(parse_config(pool_yaml(std::string("{type: ") + type + ", pool_size: [4, 2], padding: 2}"),
                                "p.yaml", {})),
        Contains("half of pool_size [4, 2]"));
  }
  const std::string yaml1d =
      "model:\n  input_shape: [1, 8]\n  layers: [{type: maxpool1d, pool_size: 3, padding: 2}, {type: "
      "flatten}, "
      "{type: dense, units: 2}]\nloss: cross_entropy\ndata: {train: {format: random, samples: 8}, "
      "num_classes: 2}\n";
  REQUIRE_THROWS_WITH(make_model(parse_config(yaml1d, "q.yaml", {})),
                      Contains("padding 2 must be at most half of pool_size 3"));
}

TEST_CASE("weights holding NaN or infinity are refused on load, naming the tensor", "[checkpoint][layers]") {
  const std::string dir = test::temp_dir("nan_weights");
  const std::string yaml =
      "model: {input_shape: [2], layers: [{type: dense, units: 4}, {type: relu}, {type: dense, units: 2}]}\n"
      "loss: cross_entropy\noptimizer: {type: sgd, lr: 0.1}\n"
      "data: {train: {format: disc, samples: 64}, num_classes: 2, batch_size: 16}\ntrain: {epochs: 1}\n";
  Config cfg = parse_config(yaml, "w.yaml", {});
  FitOptions fo;
  fo.out_dir = dir + "/run";
  std::ostringstream out;
  fit(cfg, fo, out);
  const std::string weights = fo.out_dir + "/model.safetensors";
  auto model = make_model(cfg);
  REQUIRE_NOTHROW(load_weights(weights, *model, "--weights"));
  // Poison one float of the first tensor's data: the last 4 bytes of the file belong to the last tensor.
  std::fstream f(weights, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-4, std::ios::end);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  f.write(reinterpret_cast<const char*>(&nan), 4);
  f.close();
  REQUIRE_THROWS_AS(load_weights(weights, *model, "--weights"), DataError);
  REQUIRE_THROWS_WITH(load_weights(weights, *model, "--weights"),
                      Contains("holds NaN at element") && Contains("use an earlier checkpoint"));
}

TEST_CASE("dense maps each row of a sequence with per_position, and refuses a rank-2 input without it",
          "[config][layers]") {
  auto yaml = [](const std::string& dense) {
    return "model:\n  input_shape: [6]\n  layers:\n"
           "    - {type: embedding, input_dim: 10, output_dim: 4, channels_first: false}\n"
           "    - " +
           dense + "\n    - {type: flatten}\n    - {type: dense, units: 2}\nloss: cross_entropy\n" +
           "data: {train: {format: random, samples: 8}, num_classes: 2}\n";
  };
  REQUIRE_THROWS_WITH(
      make_model(parse_config(yaml("{type: dense, units: 5}"), "d.yaml", {})),
      Contains("model.layers.1 (") && Contains("got (None, 6, 4)") && Contains("set per_position: true"));
  const auto m = make_model(parse_config(yaml("{type: dense, units: 5, per_position: true}"), "d.yaml", {}));
  CHECK(m->layers()[1]->output_shape() == Shape{6, 5});
  CHECK(m->layers()[1]->forward_flops() == 2.0 * 6 * 4 * 5);
  CHECK(m->num_params() == (5 * 4 + 5) + 10 * 4 + (30 * 2 + 2));
}
