// data.class_names: the key (list or file), its count check, and where the names appear: the
// per-class report and confusion matrix, eval's JSON (integer counts, the full report) and
// predict's --write class|both output.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "datasets/csv_records.h"
#include "datasets/npy_reader.h"
#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/metrics/metrics.h"
#include "lib/train/predict_output.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;

namespace {

std::string disc_config(const std::string& class_names_line) {
  return "model:\n  input_shape: [2]\n  layers: [{type: dense, units: 16}, {type: relu}, {type: dense, "
         "units: 2}]\n"
         "loss: {type: sparse_categorical_crossentropy, from_logits: true}\n"
         "optimizer: {type: adam, lr: 0.01}\n"
         "data:\n  train: {format: disc, samples: 400, seed: 3}\n  num_classes: 2\n" +
         class_names_line +
         "  batch_size: 32\n  validation_split: 0.2\n"
         "train: {epochs: 3, seed: 7}\n";
}

}  // namespace

TEST_CASE("data.class_names takes a list of one name per class and records it in the resolved config",
          "[config][class_names]") {
  Config c = parse_config(disc_config("  class_names: [outside, \"inside, near 0\"]\n"), "c.yaml", {});
  REQUIRE(c.data.class_names == std::vector<std::string>{"outside", "inside, near 0"});
  REQUIRE(c.resolved["data"]["class_names"][1].as<std::string>() == "inside, near 0");
  REQUIRE(parse_config(disc_config(""), "c.yaml", {}).data.class_names.empty());
}

TEST_CASE("data.class_names set empty with --set means the default (class ids), as --set k= does for any key",
          "[config][class_names]") {
  const Config c =
      parse_config(disc_config("  class_names: [outside, inside]\n"), "c.yaml", {"data.class_names="});
  REQUIRE(c.data.class_names.empty());
  REQUIRE_FALSE(c.resolved["data"]["class_names"]);
  REQUIRE(parse_config(disc_config("  class_names:\n"), "c.yaml", {}).data.class_names.empty());
}

TEST_CASE("a wrong number of class names is a one-line config error at the key", "[config][class_names]") {
  REQUIRE_THROWS_AS(parse_config(disc_config("  class_names: [a, b, c]\n"), "c.yaml", {}), ConfigError);
  REQUIRE_THROWS_WITH(
      parse_config(disc_config("  class_names: [a, b, c]\n"), "c.yaml", {}),
      "c.yaml:9:16: data.class_names: has 3 names but data.num_classes is 2; give one name per "
      "class, in class id order");
  REQUIRE_THROWS_WITH(parse_config(disc_config("  class_names: [a, \"\"]\n"), "c.yaml", {}),
                      Contains("data.class_names: item 1: expected a non-empty name"));
  REQUIRE_THROWS_WITH(parse_config(disc_config("  class_names: {a: 1}\n"), "c.yaml", {}),
                      Contains("data.class_names: expected a list of names"));
  REQUIRE_THROWS_WITH(parse_config(disc_config(""), "c.yaml", {"data.class_names=[a]"}),
                      Contains("--set: data.class_names: has 1 names but data.num_classes is 2"));
}

TEST_CASE("data.class_names may name a file of one name per line", "[config][class_names]") {
  const std::string dir = test::temp_dir("class_names_file");
  const std::string names =
      test::write_file(dir, "names.txt", "\xEF\xBB\xBFoutside\r\n\r\n  inside disc \r\n");
  Config c = parse_config(disc_config("  class_names: " + names + "\n"), "c.yaml", {});
  REQUIRE(c.data.class_names == std::vector<std::string>{"outside", "inside disc"});
  REQUIRE(c.resolved["data"]["class_names"].IsSequence());  // the names, not the path
  const std::string three = test::write_file(dir, "three.txt", "a\nb\nc\n");
  REQUIRE_THROWS_WITH(
      parse_config(disc_config("  class_names: " + three + "\n"), "c.yaml", {}),
      Contains("data.class_names: the file " + three + " has 3 names but data.num_classes is 2"));
  REQUIRE_THROWS_AS(parse_config(disc_config("  class_names: " + dir + "/missing.txt\n"), "c.yaml", {}),
                    DataError);
  // A gzip bomb (about 100 KB inflating to 100 MB of zeros) is refused at 16 MiB, not read whole.
  REQUIRE(std::system(("head -c 100000000 /dev/zero | gzip -c > '" + dir + "/bomb.txt.gz'").c_str()) == 0);
  REQUIRE_THROWS_WITH(
      parse_config(disc_config("  class_names: " + dir + "/bomb.txt.gz\n"), "c.yaml", {}),
      "'" + dir +
          "/bomb.txt.gz': a class-names file holds more than 16777216 bytes once decompressed, the limit "
          "for a class-names file");
}

TEST_CASE("the per-class report and confusion matrix are headed by class names and ids",
          "[metrics][class_names]") {
  MetricSums s;
  s.samples = 1005;
  s.confusion = {990, 3, 2, 10};  // rows: true class
  const std::string named = format_class_report(s, 2, {"outside", "inside"});
  REQUIRE_THAT(named, Contains("   class  precision") && Contains(" outside     0.9980     0.9970") &&
                          Contains("   macro "));
  REQUIRE_THAT(named, Contains("rows: true class, columns: predicted class)\n              0     1\n"
                               "0 outside   990     3\n1 inside      2    10\n"));
  REQUIRE_THAT(format_class_report(s, 2), Contains("class)\n      0     1\n0   990     3\n1     2    10\n"));
  const auto rows = class_report(s, 2, {"outside", "inside"});
  REQUIRE(rows.size() == 3);
  REQUIRE(rows[1].name == "inside");
  REQUIRE(rows[1].support == 12);
  REQUIRE(rows[1].recall == Approx(10.0 / 12));
  REQUIRE(rows[2].name == "macro");
  REQUIRE(rows[2].support == 1005);
}

TEST_CASE("predict writes the arg-max class beside or instead of the probabilities",
          "[predict][class_names]") {
  const std::string dir = test::temp_dir("predict_output");
  const std::vector<float> probs{0.2f, 0.7f, 0.1f, 0.5f, 0.2f, 0.3f};  // (2, 3)
  const std::vector<std::string> names{"cat", "say \"dog\"", "a, b"};
  REQUIRE(arg_max_classes(probs, 2, 3) == std::vector<int64_t>{1, 0});
  write_predictions(dir + "/both.csv", PredictWrite::both, probs, 2, 3, names);
  REQUIRE(test::slurp(dir + "/both.csv") ==
          "cat,\"say \"\"dog\"\"\",\"a, b\",predicted_id,predicted_name\n"
          "0.200000003,0.699999988,0.100000001,1,\"say \"\"dog\"\"\"\n"
          "0.5,0.200000003,0.300000012,0,cat\n");
  // What it wrote reads back through the CSV parser as the names themselves.
  const std::string text = test::slurp(dir + "/both.csv");
  CsvRecords records(text, ',', "both.csv");
  std::vector<std::string_view> fields;
  REQUIRE(records.next(&fields));
  REQUIRE(std::string(fields[1]) == names[1]);
  REQUIRE(std::string(fields[2]) == names[2]);
  write_predictions(dir + "/class.csv", PredictWrite::arg_max, probs, 2, 3, {});
  REQUIRE(test::slurp(dir + "/class.csv") == "predicted_id\n1\n0\n");
  write_predictions(dir + "/probs.csv", PredictWrite::probabilities, probs, 2, 3, {});
  REQUIRE(test::slurp(dir + "/probs.csv").rfind("class_0,class_1,class_2\n0.200000003,", 0) == 0);
  // Image inputs: each row starts with its file (quoted when it needs to be).
  write_predictions(dir + "/files.csv", PredictWrite::arg_max, probs, 2, 3, names, {"a/1.png", "b,2.jpg"});
  REQUIRE(test::slurp(dir + "/files.csv") ==
          "file,predicted_id,predicted_name\na/1.png,1,\"say \"\"dog\"\"\"\n\"b,2.jpg\",0,cat\n");
  // The same for the values of a regression or binary model on image inputs.
  write_value_predictions(dir + "/values.csv", PredictWrite::both, {0.25f, 0.75f}, 2, 1, {"dog"}, true,
                          {"a/1.png", "b,2.jpg"});
  REQUIRE(test::slurp(dir + "/values.csv") == "file,dog,predicted_dog\na/1.png,0.25,0\n\"b,2.jpg\",0.75,1\n");
  write_value_predictions(dir + "/reg.csv", PredictWrite::probabilities, {1.5f, -2.f}, 2, 1, {}, false,
                          {"x.png", "y.png"});
  REQUIRE(test::slurp(dir + "/reg.csv") == "file,value\nx.png,1.5\ny.png,-2\n");
  write_predictions(dir + "/class.npy", PredictWrite::arg_max, probs, 2, 3, names);
  NpyArray ids = read_npy(dir + "/class.npy");
  REQUIRE(ids.descr == "<i8");
  REQUIRE(ids.shape == std::vector<int64_t>{2});
  REQUIRE(ids.i64 == std::vector<int64_t>{1, 0});
  REQUIRE_THROWS_WITH(check_predict_output(dir + "/p.npy", PredictWrite::both),
                      Contains("--write both needs a .csv file"));
  REQUIRE_THROWS_AS(parse_predict_write("classes"), UsageError);
}

TEST_CASE("eval --log-format json gives integer counts and the per-class report with class names",
          "[cli][class_names]") {
  const std::string dir = test::temp_dir("eval_names");
  const std::string cfg =
      test::write_file(dir, "disc.yaml", disc_config("  class_names: [outside, inside]\n"));
  REQUIRE(test::run_trainer("fit " + cfg + " --out " + dir + "/run").exit_code == 0);
  auto ev = test::run_trainer("eval " + cfg + " --weights " + dir + "/run --log-format json");
  REQUIRE(ev.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(ev.out);
  REQUIRE(j["class_names"] == nlohmann::json{"outside", "inside"});
  REQUIRE(j["classes"].size() == 2);
  REQUIRE(j["classes"][1]["id"] == 1);
  REQUIRE(j["classes"][1]["name"] == "inside");
  int64_t total = 0;
  for (const auto& row : j["confusion"])
    for (const auto& count : row) {
      REQUIRE(count.is_number_integer());
      total += count.get<int64_t>();
    }
  REQUIRE(total == 80);
  REQUIRE(j["classes"][0]["support"].get<int64_t>() + j["classes"][1]["support"].get<int64_t>() == 80);
  REQUIRE(j["macro"]["support"] == 80);
  REQUIRE_THAT(ev.err, Contains("0 outside") && Contains("1 inside"));
  auto help = test::run_trainer("eval --help");
  REQUIRE_THAT(help.out, Contains("With --log-format json, stdout gets one object"));
  auto bad = test::run_trainer("eval " + cfg + " --weights " + dir + "/run --set data.class_names=[a,b,c]");
  REQUIRE(bad.exit_code == 3);
  REQUIRE_THAT(bad.err, Contains("error: --set: data.class_names: has 3 names but data.num_classes is 2"));
}
