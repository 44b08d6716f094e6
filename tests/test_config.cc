// Config validation: every bad case names the key, its line (file:line:column) and what is allowed.
#include <catch2/catch.hpp>

#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/model/model.h"

using namespace trainer;
using Catch::Contains;

namespace {

const char* kGood = R"(model:
  input_shape: [1, 8, 8]
  layers:
    - {type: conv2d, filters: 2, kernel_size: 3}
    - {type: flatten}
    - {type: dense, units: 3}
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: sgd, lr: 0.1}
data:
  train: {format: random, samples: 50}
  num_classes: 3
  batch_size: 10
train: {epochs: 2}
)";

Config parse(const std::string& text, std::vector<std::string> sets = {}) {
  return parse_config(text, "test.yaml", sets);
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  s.replace(s.find(from), from.size(), to);
  return s;
}

}  // namespace

TEST_CASE("a valid config parses with defaults filled", "[config]") {
  Config c = parse(kGood);
  REQUIRE(c.input_shape == Shape{1, 8, 8});
  REQUIRE(c.optimizer.type == "sgd");
  REQUIRE(c.optimizer.lr == 0.1);
  REQUIRE(c.epochs == 2);
  REQUIRE(c.data.batch_size == 10);
  REQUIRE(c.device == "cpu");
  REQUIRE(c.resolved["optimizer"]["momentum"].as<double>() == 0.0);
}

TEST_CASE("an unknown key names the key, its line and column, and the closest valid key", "[config]") {
  std::string bad = replace(kGood, "train: {epochs: 2}", "train: {epoch: 2}");
  REQUIRE_THROWS_WITH(parse(bad), Contains("test.yaml:13:9") && Contains("unknown key 'train.epoch'") &&
                                      Contains("did you mean 'epochs'"));
  std::string top = std::string(kGood) + "optimiser: {lr: 1}\n";
  REQUIRE_THROWS_WITH(parse(top), Contains("test.yaml:14:1") && Contains("did you mean 'optimizer'"));
}

TEST_CASE("a wrong type or out-of-range value names the key, the value and what is allowed", "[config]") {
  REQUIRE_THROWS_WITH(parse(replace(kGood, "lr: 0.1", "lr: fast")),
                      Contains("test.yaml:8:") && Contains("optimizer.lr") && Contains("expected a number") &&
                          Contains("'fast'"));
  REQUIRE_THROWS_WITH(parse(replace(kGood, "batch_size: 10", "batch_size: 0")),
                      Contains("data.batch_size") && Contains("out of range") && Contains("allowed: 1 to"));
  REQUIRE_THROWS_WITH(parse(replace(kGood, "type: sgd", "type: sgdd")), Contains("optimizer.type") &&
                                                                            Contains("did you mean 'sgd'") &&
                                                                            Contains("allowed: sgd, adam"));
  REQUIRE_THROWS_AS(parse(replace(kGood, "type: sgd", "type: sgdd")), ConfigError);
  REQUIRE_THROWS_WITH(parse(kGood, {"loss.label_smoothing=1.5"}),
                      Contains("loss.label_smoothing") && Contains("out of range") && Contains("[0, 1]"));
  REQUIRE(parse(kGood, {"loss.label_smoothing=0.1"}).loss_config.label_smoothing == 0.1f);
}

TEST_CASE("a --set override reaches any key, including list items, and wins over the file", "[config]") {
  Config c = parse(kGood, {"optimizer.lr=0.5", "model.layers.2.units=7", "train.seed=9", "device=auto"});
  REQUIRE(c.optimizer.lr == 0.5);
  REQUIRE(c.layers[2]["units"].as<int>() == 7);
  REQUIRE(c.seed == 9);
  REQUIRE(c.device == "auto");
  REQUIRE_THROWS_WITH(parse(kGood, {"model.layers.9.units=7"}), Contains("is a list of 3 items"));
  REQUIRE_THROWS_WITH(parse(kGood, {"optimizer.lr"}), Contains("expected dotted.key=value"));
  // A bad value from --set is reported as coming from --set, not from a line of the file.
  REQUIRE_THROWS_WITH(parse(kGood, {"optimizer.lr=abc"}), Contains("--set: optimizer.lr"));
}

TEST_CASE("a --set override on an aliased item changes that item only (copy on write)", "[config]") {
  // yaml-cpp shares one node between an anchor (&d) and its aliases (*d): writing through it
  // changed every place. Issue 30, item 5.
  const std::string text = replace(kGood, "    - {type: conv2d, filters: 2, kernel_size: 3}\n",
                                   "    - &c {type: conv2d, filters: 2, kernel_size: [3, 3]}\n    - *c\n");
  const auto units = [](const Config& c, size_t i) { return c.layers[i]["filters"].as<int>(); };
  const auto kernel = [](const Config& c, size_t i, size_t k) {
    return c.layers[i]["kernel_size"][k].as<int>();
  };
  Config plain = parse(text);
  REQUIRE(plain.layers.size() == 4);
  REQUIRE(units(plain, 0) == 2);
  REQUIRE(units(plain, 1) == 2);

  Config alias = parse(text, {"model.layers.1.filters=5"});
  CHECK(units(alias, 0) == 2);
  CHECK(units(alias, 1) == 5);
  CHECK(kernel(alias, 1, 0) == 3);  // the rest of the item is still the anchored one's

  Config anchor = parse(text, {"model.layers.0.filters=6"});
  CHECK(units(anchor, 0) == 6);
  CHECK(units(anchor, 1) == 2);

  // A list inside the shared item, one element of it, and the whole item.
  Config element = parse(text, {"model.layers.1.kernel_size.0=1"});
  CHECK(kernel(element, 0, 0) == 3);
  CHECK(kernel(element, 1, 0) == 1);
  CHECK(kernel(element, 1, 1) == 3);
  Config whole = parse(text, {"model.layers.1={type: conv2d, filters: 4, kernel_size: 1}"});
  CHECK(units(whole, 0) == 2);
  CHECK(units(whole, 1) == 4);
  // Two overrides in turn, through the same alias.
  Config both = parse(text, {"model.layers.1.filters=7", "model.layers.0.kernel_size.1=1"});
  CHECK(units(both, 0) == 2);
  CHECK(units(both, 1) == 7);
  CHECK(kernel(both, 0, 1) == 1);
  CHECK(kernel(both, 1, 1) == 3);

  // A null item (`- ` or a comment alone) becomes a mapping, as before (fuzz_config found the
  // copy-on-write walk treating it as a list).
  const std::string with_null = replace(text, "    - *c\n", "    - # nothing here\n");
  REQUIRE_THROWS_AS(parse(with_null, {"model.layers.1.filters=8"}), ConfigError);
  REQUIRE_THROWS_WITH(parse(with_null, {"model.layers.1.filters=8"}), Contains("model.layers.1"));
  // A merge key (<<) shares the merged values with the anchored mapping.
  const std::string merged = replace(text, "    - *c\n", "    - {<<: *c, filters: 3}\n");
  Config m = parse(merged, {"model.layers.1.kernel_size.1=2"});
  CHECK(units(m, 1) == 3);
  CHECK(kernel(m, 0, 1) == 3);
  CHECK(kernel(m, 1, 1) == 2);
}

TEST_CASE("a range's bounds are shown as they would be written", "[config]") {
  // 1e-12, not 9.9999999999999998e-13 (yaml-cpp's 17 digits); 1000000, not 1e+06.
  const std::string bn = replace(kGood, "{type: flatten}", "{type: batchnorm, epsilon: 0}");
  REQUIRE_THROWS_WITH(parse(bn), Contains("epsilon: value 0 is out of range; allowed: [1e-12, 1]"));
  const std::string lr = replace(kGood, "{type: flatten}", "{type: leaky_relu, alpha: -1}");
  REQUIRE_THROWS_WITH(parse(lr), Contains("allowed: [0, 1000000]"));
}

TEST_CASE("invalid YAML reports the line", "[config]") {
  REQUIRE_THROWS_WITH(parse("model: [1, 2\n"), Contains("test.yaml:") && Contains("invalid YAML"));
}

TEST_CASE("an unknown layer type lists the registered types", "[config][registry]") {
  // Loading the config checks every layer's type and keys (read_layer_list), before any model.
  REQUIRE_THROWS_WITH(parse(replace(kGood, "type: flatten", "type: flaten")),
                      Contains("test.yaml:5:") && Contains("unknown layer type 'flaten'") &&
                          Contains("did you mean 'flatten'") && Contains("registered types:") &&
                          Contains("conv2d") && Contains("maxpool2d"));
  // The model checks the same with the same validator when it is built from YAML of its own.
  Config c = parse(kGood);
  c.layers[1]["type"] = "flaten";
  REQUIRE_THROWS_WITH(Model(c.input_shape, c.layers, c.init, c.file),
                      Contains("unknown layer type 'flaten'") && Contains("did you mean 'flatten'"));
}

TEST_CASE("a shape error names the layer index, type and shapes", "[config][shapes]") {
  Config c = parse(replace(kGood, "    - {type: flatten}\n", ""));
  REQUIRE_THROWS_WITH(Model(c.input_shape, c.layers, c.init, c.file), Contains("model.layers.1 (dense") &&
                                                                          Contains("(None, 2, 6, 6)") &&
                                                                          Contains("flatten"));
  Config big = parse(replace(kGood, "kernel_size: 3", "kernel_size: 9"));
  REQUIRE_THROWS_WITH(Model(big.input_shape, big.layers, big.init, big.file),
                      Contains("model.layers.0 (conv2d") && Contains("does not fit input (None, 1, 8, 8)"));
}

TEST_CASE("layer hyper-parameters are validated like any other key", "[config]") {
  REQUIRE_THROWS_WITH(parse(replace(kGood, "units: 3", "unit: 3")),
                      Contains("model.layers.2") && (Contains("units") || Contains("unit")));
  REQUIRE_THROWS_WITH(parse(replace(kGood, "{type: flatten}", "{type: dropout, rate: 1.5}")),
                      Contains("model.layers.1.rate") && Contains("out of range"));
}

TEST_CASE("the model infers shapes and counts parameters like Keras", "[model]") {
  Config c = parse(kGood);
  Model m(c.input_shape, c.layers, c.init, c.file);
  REQUIRE(m.output_shape() == Shape{3});
  REQUIRE(m.num_params() == (2 * 9 + 2) + (72 * 3 + 3));
  REQUIRE(m.layers()[0]->name() == "conv2d_1");
}
