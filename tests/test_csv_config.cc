// The csv format's keys in a config: data.num_classes may be left out for a CSV source (its labels
// give the classes) and nowhere else; the column lists, delimiter, missing and the learned
// mappings are checked at their file:line:column before any file is read.
#include <catch2/catch.hpp>

#include "lib/config/config.h"
#include "lib/core/error.h"

using namespace trainer;
using Catch::Contains;

namespace {

std::string config_with(const std::string& train, const std::string& data_extra = "") {
  return "model:\n  input_shape: [2]\n  layers: [{type: dense, units: 2}]\nloss: cross_entropy\n"
         "optimizer: {type: sgd, lr: 0.1}\ndata:\n  train: " +
         train + "\n" + data_extra + "  batch_size: 10\n";
}

}  // namespace

TEST_CASE("data.num_classes may be left out for a csv source, which discovers the classes", "[config][csv]") {
  const Config c = parse_config(config_with("{format: csv, path: t.csv, label_column: [y]}"), "c.yaml", {});
  REQUIRE(c.data.num_classes == 0);
  REQUIRE_FALSE(c.resolved["data"]["num_classes"]);
  REQUIRE(c.resolved["data"]["train"]["label_column"][0].as<std::string>() == "y");
  REQUIRE_FALSE(c.resolved["data"]["train"]["columns"]);  // learned keys appear once a run records them
  // class_names alone give the number.
  REQUIRE(parse_config(config_with("{format: csv, path: t.csv}", "  class_names: [a, b, c]\n"), "c.yaml", {})
              .data.num_classes == 3);
  REQUIRE_THROWS_WITH(
      parse_config(config_with("{format: disc}"), "c.yaml", {}),
      Contains("data.num_classes: is required") && Contains("csv and image folder sources discover it"));
}

TEST_CASE("csv keys are checked at their position: delimiter, missing.fill, learned mappings",
          "[config][csv]") {
  REQUIRE_THROWS_WITH(parse_config(config_with("{format: csv, path: t.csv, delimiter: ab}"), "c.yaml", {}),
                      Contains("c.yaml:7:") && Contains("data.train.delimiter: must be one character or "
                                                        "'whitespace', found 'ab'"));
  REQUIRE_NOTHROW(
      parse_config(config_with("{format: csv, path: t.csv, delimiter: whitespace}"), "c.yaml", {}));
  REQUIRE_THROWS_WITH(
      parse_config(config_with("{format: csv, path: t.csv, missing: {fill: median}}"), "c.yaml", {}),
      Contains("data.train.missing.fill") && Contains("expected mean, zero or a number, found 'median'"));
  REQUIRE_NOTHROW(
      parse_config(config_with("{format: csv, path: t.csv, missing: {fill: -1.5}}"), "c.yaml", {}));
  REQUIRE_THROWS_WITH(
      parse_config(config_with("{format: csv, path: t.csv, missing: {fil: mean}}"), "c.yaml", {}),
      Contains("unknown key 'data.train.missing.fil'"));
  REQUIRE_THROWS_WITH(parse_config(config_with("{format: csv, path: t.csv, missing: mean}"), "c.yaml", {}),
                      Contains("data.train.missing: expected a mapping"));
  REQUIRE_THROWS_WITH(
      parse_config(config_with("{format: csv, path: t.csv, standardize: {mean: [1, 2], std: [1]}}"), "c.yaml",
                   {}),
      Contains("data.train.standardize.std: needs one value per mean"));
  REQUIRE_THROWS_WITH(
      parse_config(config_with("{format: csv, path: t.csv, normalize: zscore}"), "c.yaml", {}),
      Contains("data.train.normalize") && Contains("standardize"));
}
