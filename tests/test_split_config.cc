// data.split and data.validation_split in the config, and the split as fit, eval and --resume
// load it: seeded, stratified by default, the same from a run directory's config, with a warning
// naming every class that one side lacks.
#include <catch2/catch.hpp>
#include <map>

#include "datasets/npy_reader.h"
#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/keys/yaml_floats.h"
#include "lib/train/session.h"
#include "tests/test_util.h"
#include "tests/warning_sink.h"

using namespace trainer;
using Catch::Contains;

namespace {

// 4 classes of 25 samples each, in class order (as a walk over class folders gives them).
struct SortedData {
  std::string dir, x, y;
  SortedData() : dir(test::temp_dir("sorted_split")), x(dir + "/x.npy"), y(dir + "/y.npy") {
    std::vector<float> xs;
    std::vector<int64_t> ys;
    for (int64_t i = 0; i < 100; ++i) {
      xs.push_back(float(i));
      xs.push_back(float(i / 25));
      ys.push_back(i / 25);
    }
    write_npy_f32(x, {100, 2}, xs.data());
    write_npy_i64(y, {100}, ys.data());
  }
};

std::string config(const SortedData& d, const std::string& data_keys) {
  return "model:\n  input_shape: [2]\n  layers: [{type: dense, units: 4}]\n"
         "data:\n  train: {format: npy, x: " +
         d.x + ", y: " + d.y + "}\n  num_classes: 4\n" + data_keys + "train: {seed: 5}\n";
}

// The config a run directory records (fit adds the described layers), read back.
Config recorded(const Config& c) {
  YAML::Node r = YAML::Clone(c.resolved);
  r["model"]["layers"] = make_model(c)->describe_layers();
  return parse_config(dump_yaml(r), "config.yaml", {});
}

std::map<int32_t, int64_t> class_counts(const Dataset& d) {
  std::map<int32_t, int64_t> m;
  for (int32_t y : d.labels) ++m[y];
  return m;
}

}  // namespace

TEST_CASE("data.split's long form, its short form validation_split, and their defaults", "[config][split]") {
  const SortedData d;
  const Config shortform = parse_config(config(d, "  validation_split: 0.2\n"), "s.yaml", {});
  CHECK(shortform.data.validation_split == 0.2);
  CHECK(shortform.data.split_shuffle);
  CHECK(shortform.data.split_stratify);
  // The resolved config (--print-config, a run's config.yaml) records the long form only.
  CHECK_FALSE(shortform.resolved["data"]["validation_split"]);
  CHECK(shortform.resolved["data"]["split"]["fraction"].as<double>() == 0.2);
  CHECK(shortform.resolved["data"]["split"]["stratify"].as<bool>());

  const Config keras = parse_config(config(d, "  split: {fraction: 0.25, shuffle: false}\n"), "s.yaml", {});
  CHECK(keras.data.validation_split == 0.25);
  CHECK_FALSE(keras.data.split_shuffle);
  CHECK_FALSE(keras.data.split_stratify);  // follows shuffle
  const Config plain = parse_config(config(d, "  split: {fraction: 0.25, stratify: false}\n"), "s.yaml", {});
  CHECK(plain.data.split_shuffle);
  CHECK_FALSE(plain.data.split_stratify);
  // What a run directory records reads back the same.
  const Config again = recorded(keras);
  CHECK(again.data.validation_split == 0.25);
  CHECK_FALSE(again.data.split_shuffle);
}

TEST_CASE("data.split's conflicts are config errors naming the keys", "[config][split]") {
  const SortedData d;
  CHECK_THROWS_WITH(
      parse_config(config(d, "  validation_split: 0.2\n  split: {fraction: 0.1}\n"), "s.yaml", {}),
      Contains("s.yaml:7:") && Contains("data.validation_split: cannot be combined with data.split") &&
          Contains("give one of them"));
  CHECK_THROWS_WITH(
      parse_config(config(d, "  split: {fraction: 0.2, shuffle: false, stratify: true}\n"), "s.yaml", {}),
      Contains("data.split.stratify: true needs shuffle: true"));
  CHECK_THROWS_WITH(parse_config(config(d, "  split: {fraction: 1.5}\n"), "s.yaml", {}),
                    Contains("data.split.fraction: value 1.5 is out of range"));
  CHECK_THROWS_WITH(parse_config(config(d, "  split: {fraction: 0.2, stratfy: true}\n"), "s.yaml", {}),
                    Contains("stratify"));
  CHECK_THROWS_WITH(
      parse_config(config(d, "  split: {fraction: 0.2}\n  validation: {format: disc}\n"), "s.yaml", {}),
      Contains("data.split: cannot be combined with an explicit data.validation source"));
}

TEST_CASE("load_run_data splits rows sorted by class with every class on both sides, by default",
          "[split][data]") {
  const SortedData d;
  const Config c = parse_config(config(d, "  validation_split: 0.2\n"), "s.yaml", {});
  const RunData r = load_run_data(c, true);
  REQUIRE(r.val.size() == 20);
  REQUIRE(r.train.size() == 80);
  CHECK(class_counts(r.val) == std::map<int32_t, int64_t>{{0, 5}, {1, 5}, {2, 5}, {3, 5}});
  // eval loads the validation part alone (need_train false) and gets the same samples.
  const RunData e = load_run_data(c, false);
  CHECK(e.val.f32 == r.val.f32);
  // So does a run directory's config.yaml (fit --resume RUN, eval RUN), and another seed does not.
  CHECK(load_run_data(recorded(c), true).val.f32 == r.val.f32);
  CHECK(load_run_data(parse_config(config(d, "  validation_split: 0.2\n"), "s.yaml", {"train.seed=6"}), true)
            .val.f32 != r.val.f32);
}

TEST_CASE("Keras' last-rows split of sorted rows warns, naming the classes each side lacks",
          "[split][data]") {
  const SortedData d;
  const Config c = parse_config(
      config(d, "  split: {fraction: 0.2, shuffle: false}\n  class_names: [a, b, c, d]\n"), "s.yaml", {});
  RunData r;
  {
    test::ExpectWarning w(
        "data.split: 3 classes in the training data have no validation samples: 0 (a), "
        "1 (b), 2 (c) (the validation metrics say nothing about them)");
    r = load_run_data(c, true);
  }
  CHECK(class_counts(r.val) == std::map<int32_t, int64_t>{{3, 20}});
}

TEST_CASE("an explicit data.validation source lacking or adding classes is named too", "[split][data]") {
  const SortedData d;
  const std::string dir = test::temp_dir("val_classes");
  const std::vector<float> xs{0, 0, 1, 1, 2, 2};
  const std::vector<int64_t> ys{0, 0, 0};
  write_npy_f32(dir + "/xv.npy", {3, 2}, xs.data());
  write_npy_i64(dir + "/yv.npy", {3}, ys.data());
  const Config c = parse_config(
      config(d, "  validation: {format: npy, x: " + dir + "/xv.npy, y: " + dir + "/yv.npy}\n"), "s.yaml", {});
  test::ExpectWarning w(
      "data.validation: 3 classes in the training data have no validation samples: 1, 2, 3");
  load_run_data(c, true);
}
