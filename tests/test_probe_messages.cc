// Issue 30's small items and message wordings: each case as a user meets it, with its message and
// exit code (batchnorm on one value per channel, pool padding past half the window, blocks nested
// too deep, --mem-limit that is no number, a flag given twice).
#include <catch2/catch.hpp>
#include <sstream>

#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/train/fit.h"
#include "lib/train/session.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;

namespace {

std::string bn_config(int64_t samples, int64_t batch) {
  return "model:\n  input_shape: [4]\n  layers: [{type: dense, units: 8}, {type: batchnorm, name: bn}, "
         "{type: dense, units: 2}]\n"
         "data: {train: {format: random, samples: " +
         std::to_string(samples) + "}, num_classes: 2, batch_size: " + std::to_string(batch) +
         "}\ntrain: {epochs: 1}\n";
}

FitOptions quiet() {
  FitOptions o;
  o.report.quiet = true;
  return o;
}

}  // namespace

TEST_CASE("batchnorm trained on one value per channel is refused, as PyTorch refuses it",
          "[batchnorm][fit]") {
  std::ostringstream out;
  CHECK_THROWS_WITH(
      fit(parse_config(bn_config(8, 1), "bn.yaml", {}), quiet(), out),
      Contains("model.layers.1 (batchnorm 'bn'): a training batch of 1 sample gives it 1 value per "
               "channel on (None, 8) inputs") &&
          Contains("Expected more than 1 value per channel when training") &&
          Contains("use a data.batch_size of at least 2"));
  // The last batch of 9 samples in batches of 4 holds one.
  CHECK_THROWS_WITH(fit(parse_config(bn_config(9, 4), "bn.yaml", {}), quiet(), out),
                    Contains("the last batch holds 1 of the 9 training samples: set data.drop_last: true"));
  CHECK_THROWS_AS(fit(parse_config(bn_config(9, 4), "bn.yaml", {}), quiet(), out), ConfigError);
  // Dropping it, or images (1 sample of 2x2 pixels: 4 values per channel), train.
  CHECK(fit(parse_config(bn_config(9, 4), "bn.yaml", {"data.drop_last=true"}), quiet(), out).epochs_run == 1);
  const std::string images =
      "model:\n  input_shape: [1, 2, 2]\n  layers: [{type: conv2d, filters: 2, kernel_size: 1}, {type: "
      "batchnorm}, "
      "{type: flatten}, {type: dense, units: 2}]\n"
      "data: {train: {format: random, samples: 3}, num_classes: 2, batch_size: 1}\ntrain: {epochs: 1}\n";
  CHECK(fit(parse_config(images, "bn.yaml", {}), quiet(), out).epochs_run == 1);
  auto cli = test::run_trainer("fit " + test::write_file(test::temp_dir("bn1"), "bn.yaml", bn_config(8, 1)) +
                               " --no-out");
  CHECK(cli.exit_code == 3);
  CHECK_THAT(cli.err, Contains("a training batch of 1 sample"));
}

TEST_CASE("pool padding past half the window is a config error in PyTorch's words", "[config][shapes]") {
  const auto pool = [](const std::string& layer) {
    return "model:\n  input_shape: [1, 8, 8]\n  layers: [" + layer +
           ", {type: flatten}, {type: dense, units: 2}]\ndata: {train: {format: random}, num_classes: 2}\n";
  };
  CHECK_THROWS_WITH(
      make_model(parse_config(pool("{type: avgpool2d, pool_size: 2, padding: 2}"), "p.yaml", {})),
      "model.layers.0 (avgpool2d 'avgpool2d_1'): padding 2 must be at most half of pool_size 2");
  CHECK_THROWS_WITH(
      make_model(parse_config(pool("{type: maxpool2d, pool_size: [3, 2], padding: 2}"), "p.yaml", {})),
      Contains("padding 2 must be at most half of pool_size [3, 2]"));
  CHECK_NOTHROW(make_model(parse_config(pool("{type: maxpool2d, pool_size: 3, padding: 1}"), "p.yaml", {})));
  const std::string one_d =
      "model:\n  input_shape: [1, 8]\n  layers: [{type: maxpool1d, pool_size: 2, padding: 2}, {type: "
      "flatten}, "
      "{type: dense, units: 2}]\ndata: {train: {format: random}, num_classes: 2}\n";
  CHECK_THROWS_WITH(make_model(parse_config(one_d, "p.yaml", {})),
                    Contains("(maxpool1d 'maxpool1d_1'): padding 2 must be at most half of pool_size 2"));
  auto cli =
      test::run_trainer("summary " + test::write_file(test::temp_dir("pool_pad"), "p.yaml",
                                                      pool("{type: avgpool2d, pool_size: 2, padding: 2}")));
  CHECK(cli.exit_code == 3);
  CHECK_THAT(cli.err, Contains("padding 2 must be at most half of pool_size 2"));
  CHECK_THAT(cli.err, !Contains("oneDNN"));
}

TEST_CASE("blocks nested more than 16 deep are named as such, with the chain", "[config][graph]") {
  std::string blocks = "  blocks:\n";
  for (int i = 0; i < 17; ++i)
    blocks += "    b" + std::to_string(i) + ":\n      layers: [{type: " +
              (i < 16 ? "b" + std::to_string(i + 1) : std::string("dense, units: 2")) + "}]\n";
  const std::string cfg = "model:\n  input_shape: [2]\n  layers: [{type: b0}]\n" + blocks +
                          "data: {train: {format: disc}, num_classes: 2}\n";
  std::string chain;
  for (int i = 0; i < 16; ++i) chain += "b" + std::to_string(i) + " \u2192 ";
  CHECK_THROWS_WITH(
      parse_config(cfg, "deep.yaml", {}),
      Contains("blocks are nested more than 16 deep (" + chain + "b16)") && !Contains("uses itself"));
}

TEST_CASE("a --mem-limit that is not a number, and a one-value flag given twice, say so", "[cli]") {
  const std::string cfg = test::write_file(test::temp_dir("flags"), "d.yaml",
                                           "model:\n  input_shape: [2]\n  layers: [{type: dense, units: 2}]\n"
                                           "data: {train: {format: disc}, num_classes: 2}\n");
  auto mem = test::run_trainer("fit " + cfg + " --mem-limit abc");
  CHECK(mem.exit_code == 2);
  CHECK_THAT(mem.err, Contains("--mem-limit: 'abc' is not a whole number of MiB"));
  auto out = test::run_trainer("fit " + cfg + " --out first --out=second");
  CHECK(out.exit_code == 2);
  CHECK_THAT(out.err, Contains("--out given twice: 'first' and 'second'; give it once"));
  auto epochs = test::run_trainer("fit " + cfg + " --epochs 1 --epochs 2 --epochs 3");
  CHECK(epochs.exit_code == 2);
  CHECK_THAT(epochs.err, Contains("--epochs given 3 times: '1', '2' and '3'"));
  // --set is repeatable by design.
  CHECK(test::run_trainer("fit " + cfg + " --print-config --set train.epochs=2 --set data.batch_size=4")
            .exit_code == 0);
}

TEST_CASE("a default layer name taken by another layer names both layers", "[config][graph]") {
  const std::string cfg = R"(model:
  input_shape: [2]
  layers:
    - {type: dense, units: 4, name: dense_2}
    - {type: dense, units: 2}
data: {train: {format: disc}, num_classes: 2}
)";
  CHECK_THROWS_WITH(
      make_model(parse_config(cfg, "x.yaml", {})),
      "x.yaml:5:7: model.layers.1: its default name 'dense_2' is taken by model.layers.0; name one "
      "of them");
  CHECK_THROWS_WITH(make_model(parse_config(cfg, "x.yaml", {"model.layers.1.name=dense_2"})),
                    Contains("duplicate layer name 'dense_2'") && Contains("model.layers.0"));
}

TEST_CASE("input_shape: [] is refused by every verb, summary included", "[config][shapes]") {
  const std::string cfg =
      "model:\n  input_shape: []\n  layers: [{type: dense, units: 2}]\n"
      "data: {train: {format: disc}, num_classes: 2}\n";
  CHECK_THROWS_WITH(
      parse_config(cfg, "e.yaml", {}),
      "e.yaml:2:16: model.input_shape: is empty: give the shape of one sample, e.g. input_shape: [1, "
      "28, 28] or [784]");
  auto summary =
      test::run_trainer("summary " + test::write_file(test::temp_dir("empty_shape"), "e.yaml", cfg));
  CHECK(summary.exit_code == 3);
  CHECK_THAT(summary.err, Contains("model.input_shape: is empty"));
}

TEST_CASE("top_k_accuracy with k above the number of classes is refused at k", "[config]") {
  const auto cfg = [](const std::string& metrics) {
    return "model:\n  input_shape: [2]\n  layers: [{type: dense, units: 3}]\nmetrics: " + metrics +
           "\ndata: {train: {format: disc}, num_classes: 3}\n";
  };
  CHECK_THROWS_WITH(
      parse_config(cfg("[accuracy, {type: top_k_accuracy, k: 4}]"), "k.yaml", {}),
      "k.yaml:4:47: metrics.1.k: 4 is more than data.num_classes 3; top_k_accuracy needs k at most "
      "the number of classes");
  CHECK_THROWS_WITH(parse_config(cfg("[top_k_accuracy]"), "k.yaml", {}),
                    Contains("metrics.0.k: 5 (the default) is more than data.num_classes 3"));
  CHECK(parse_config(cfg("[{type: top_k_accuracy, k: 3}]"), "k.yaml", {}).metrics[0].k == 3);
}
