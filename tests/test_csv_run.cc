// A CSV run end to end through the trainer binary (issue 29): string labels and a string feature
// column, classes discovered (data.num_classes left out), features standardized; the run's
// config.yaml records what the training data taught, and eval RUN and predict RUN use it: the
// same class ids and one-hot layout, the training statistics, an unseen category refused. And
// configs/iris_mlp.yaml, read in place from Debian's python3-sklearn, trains to >= 0.97 (training
// part) and >= 0.8 (the all-virginica validation tail).
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "datasets/split.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;

namespace {

// Two features: x (numeric, -1 or +1 for "cat" and "dog" with noise) and a color (noise).
std::string animals_csv(int rows) {
  std::string s = "x,color,animal\n";
  for (int i = 0; i < rows; ++i) {
    const bool dog = (i * 7) % 3 == 0;
    s += std::to_string((dog ? 10.0 : -10.0) + (i % 5) * 0.1) + "," +
         std::vector<std::string>{"red", "blue", "green"}[size_t(i % 3)] + "," + (dog ? "dog" : "cat") + "\n";
  }
  return s;
}

const char* kAnimals = R"(model:
  input_shape: [4]
  layers: [{type: dense, units: 8}, {type: relu}, {type: dense, units: 2}]
loss: cross_entropy
optimizer: {type: adam, lr: 0.05}
metrics: [accuracy]
data:
  train: {format: csv, path: TRAIN, header: true, label_column: animal, normalize: standardize}
  validation: {format: csv, path: VAL, header: true, label_column: animal, normalize: standardize}
  batch_size: 10
train: {epochs: 5, seed: 3}
)";

std::string with_paths(std::string s, const std::string& train, const std::string& val) {
  s.replace(s.find("TRAIN"), 5, train);
  s.replace(s.find("VAL"), 3, val);
  return s;
}

}  // namespace

TEST_CASE("a CSV run records its classes and encoding; eval RUN and predict RUN use them", "[csv][cli]") {
  const std::string dir = test::temp_dir("csv_run");
  const std::string train = test::write_file(dir, "train.csv", animals_csv(60));
  const std::string val = test::write_file(dir, "val.csv", "x,color,animal\n10,red,dog\n-10,green,cat\n");
  const std::string config = test::write_file(dir, "animals.yaml", with_paths(kAnimals, train, val));
  const std::string run = dir + "/run";
  auto fit = test::run_trainer("fit " + config + " --out " + run);
  INFO(fit.err);
  REQUIRE(fit.exit_code == 0);
  const YAML::Node recorded = YAML::LoadFile(run + "/config.yaml");
  REQUIRE(recorded["data"]["num_classes"].as<int>() == 2);
  REQUIRE(recorded["data"]["class_names"].as<std::vector<std::string>>() ==
          std::vector<std::string>{"cat", "dog"});
  const YAML::Node t = recorded["data"]["train"];
  REQUIRE(t["columns"].as<int>() == 3);
  REQUIRE(t["categories"]["color"].as<std::vector<std::string>>() ==
          std::vector<std::string>{"blue", "green", "red"});
  REQUIRE(t["standardize"]["mean"].size() == 1);  // x only: one-hot columns are not standardized
  REQUIRE(t["standardize"]["std"][0].as<double>() > 9.0);

  auto ev = test::run_trainer("eval " + run + " --log-format json");
  INFO(ev.err);
  REQUIRE(ev.exit_code == 0);
  REQUIRE_THAT(ev.out, Contains("\"class_names\":[\"cat\",\"dog\"]") && Contains("\"samples\":2"));

  // predict: with the label column, without it; class names in the output.
  const std::string with_label =
      test::write_file(dir, "p1.csv", "x,color,animal\n10,blue,dog\n-10,red,cat\n");
  const std::string without = test::write_file(dir, "p2.csv", "x,color\n10,blue\n-10,red\n");
  for (const std::string& input : {with_label, without}) {
    CAPTURE(input);
    auto p = test::run_trainer("predict " + run + " --input " + input + " --output " + dir +
                               "/out.csv --write both");
    INFO(p.err);
    REQUIRE(p.exit_code == 0);
    const std::string out = test::slurp(dir + "/out.csv");
    REQUIRE_THAT(out, Contains("cat,dog,predicted_id,predicted_name"));
    REQUIRE_THAT(out, Contains(",1,dog\n") && Contains(",0,cat\n"));
  }
  // An unseen category at predict time is an error naming file:line, column and value.
  const std::string unseen = test::write_file(dir, "p3.csv", "x,color\n10,purple\n");
  auto bad = test::run_trainer("predict " + run + " --input " + unseen + " --output " + dir + "/out.csv");
  REQUIRE(bad.exit_code == 4);
  REQUIRE_THAT(bad.err, Contains(unseen + ":2: column 2 ('color'): unseen category 'purple'"));
  // An unseen label at eval names the row.
  test::write_file(dir, "val.csv", "x,color,animal\n10,red,dog\n-10,green,cow\n");
  auto bad_label = test::run_trainer("eval " + run);
  REQUIRE(bad_label.exit_code == 4);
  REQUIRE_THAT(bad_label.err,
               Contains(val + ":3: column 3 ('animal') (label): 'cow' is not one of the class names "
                              "(cat, dog)"));
}

TEST_CASE("configs/iris_mlp.yaml trains on scikit-learn's iris.csv to >= 0.97 accuracy, >= 0.9 validated",
          "[csv][cli][configs]") {
  const std::string iris = "/usr/lib/python3/dist-packages/sklearn/datasets/data/iris.csv";
  if (!std::filesystem::exists(iris)) {
    WARN("skipped: " + iris + " is missing (scripts/setup.sh installs python3-sklearn)");
    return;
  }
  const std::string dir = test::temp_dir("iris");
  const std::string run = dir + "/run";
  auto fit =
      test::run_trainer("fit " + std::string(TRAINER_SOURCE_DIR) + "/configs/iris_mlp.yaml --out " + run);
  INFO(fit.err);
  REQUIRE(fit.exit_code == 0);
  const auto summary = nlohmann::json::parse(test::slurp(run + "/summary.json"));
  INFO(summary.dump());
  auto ev = test::run_trainer("eval " + run + " --log-format json");
  REQUIRE(ev.exit_code == 0);
  // The seeded stratified split: 10 of each species validate (0.9667 with seed 1).
  const auto val = nlohmann::json::parse(ev.out);
  CHECK(val["accuracy"].get<double>() >= 0.9);
  auto ev_train = test::run_trainer("eval " + run + " --split train --log-format json");
  REQUIRE(ev_train.exit_code == 0);
  const auto tr = nlohmann::json::parse(ev_train.out);
  CHECK(tr["accuracy"].get<double>() >= 0.97);
  // predict reads the file as it is (its first line of counts skipped, labels present).
  auto p =
      test::run_trainer("predict " + run + " --input " + iris + " --output " + dir + "/p.csv --write class");
  INFO(p.err);
  REQUIRE(p.exit_code == 0);
  REQUIRE_THAT(test::slurp(dir + "/p.csv"), Contains("predicted_name") && Contains("setosa"));
}

// The last epoch's JSON event of `trainer fit ... --log-format json`.
static nlohmann::json last_epoch(const std::string& out) {
  nlohmann::json last;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    if (line.find("\"event\":\"epoch\"") != std::string::npos) last = nlohmann::json::parse(line);
  return last;
}

TEST_CASE("the binary, regression and multi-label configs train on Debian's data sets to stated scores",
          "[csv][cli][configs]") {
  const std::string data = "/usr/lib/python3/dist-packages/sklearn/datasets/data";
  if (!std::filesystem::exists(data + "/breast_cancer.csv")) {
    WARN("skipped: " + data + " is missing (scripts/setup.sh installs python3-sklearn)");
    return;
  }
  const std::string src = TRAINER_SOURCE_DIR;
  auto binary =
      test::run_trainer("fit " + src + "/configs/breast_cancer_binary.yaml --no-out --log-format json");
  INFO(binary.err);
  REQUIRE(binary.exit_code == 0);
  const auto b = last_epoch(binary.out);
  CHECK(b["val_f1"].get<double>() >= 0.93);   // 0.9595 with seed 1
  CHECK(b["val_auc"].get<double>() >= 0.95);  // 0.9777
  auto reg = test::run_trainer("fit " + src + "/configs/diabetes_regression.yaml --no-out --log-format json");
  INFO(reg.err);
  REQUIRE(reg.exit_code == 0);
  CHECK(last_epoch(reg.out)["val_r2"].get<double>() >= 0.35);  // 0.468; scikit-learn's Ridge ~0.45
  const std::string dir = test::temp_dir("wine_ml");
  REQUIRE(std::system(("/usr/bin/python3 " + src + "/scripts/make_multilabel_csv.py --out " + dir +
                       "/wine.csv > /dev/null")
                          .c_str()) == 0);
  auto ml = test::run_trainer(
      "fit " + src + "/configs/wine_multilabel.yaml --no-out --log-format json --set data.train.path=" + dir +
      "/wine.csv");
  INFO(ml.err);
  REQUIRE(ml.exit_code == 0);
  CHECK(last_epoch(ml.out)["val_f1"].get<double>() >= 0.75);  // 0.815 micro F1
}

// A CSV source's `targets:` file is recorded as an absolute path, as `path:` is, so that
// `eval RUN` reads it from any directory.
TEST_CASE("a CSV source's targets file is recorded as an absolute path in the run's config.yaml",
          "[csv][cli]") {
  const std::string dir = test::temp_dir("csv_targets_path");
  std::string x = "a,b\n", y = "label\n";
  for (int i = 0; i < 40; ++i) {
    x += std::to_string(i % 2 ? 5 + i % 3 : -5 - i % 3) + "," + std::to_string(i % 7) + "\n";
    y += std::string(i % 2 ? "1" : "0") + "\n";
  }
  test::write_file(dir, "x.csv", x);
  test::write_file(dir, "y.csv", y);
  const std::string config = test::write_file(dir, "t.yaml", R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 2}]
loss: cross_entropy
optimizer: {type: sgd, lr: 0.1}
data:
  train: {format: csv, path: x.csv, targets: y.csv, header: true, label_column: label}
  num_classes: 2
  batch_size: 8
train: {epochs: 1, seed: 1}
)");
  const std::filesystem::path cwd = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  auto fit = test::run_trainer("fit t.yaml --out run");
  std::filesystem::current_path(cwd);
  INFO(fit.err);
  REQUIRE(fit.exit_code == 0);
  const YAML::Node t = YAML::LoadFile(dir + "/run/config.yaml")["data"]["train"];
  REQUIRE(t["path"].as<std::string>() == (std::filesystem::path(dir) / "x.csv").lexically_normal().string());
  REQUIRE(t["targets"].as<std::string>() ==
          (std::filesystem::path(dir) / "y.csv").lexically_normal().string());
  auto ev = test::run_trainer("eval " + dir + "/run --split train");  // from another directory
  INFO(ev.err);
  REQUIRE(ev.exit_code == 0);
  REQUIRE_THAT(ev.out + ev.err, Contains("(40 samples)"));
  (void)config;
}

// A shuffled, stratified validation split: the standardize statistics and the fill means come from
// the rows the split gives training, never from a validation row (the validation rows here hold
// values far from the training rows', so any leak moves the recorded mean).
TEST_CASE("a CSV's learned statistics come from the training part of a shuffled split only", "[csv][cli]") {
  const std::string dir = test::temp_dir("csv_split_stats");
  const int n = 50;
  Dataset labels_only;
  labels_only.name = "x.csv";
  for (int i = 0; i < n; ++i) labels_only.labels.push_back(i % 2);
  SplitOptions so;
  so.fraction = 0.2;
  so.seed = 11;
  const std::vector<bool> val = validation_mask(labels_only, so);
  std::string csv = "a,b,y\n";
  double sum_a = 0, sum_b = 0;
  int train_rows = 0, train_b = 0;
  for (int i = 0; i < n; ++i) {
    const double a = val[size_t(i)] ? 1000.0 + i : double(i);
    const bool missing_b = i % 7 == 3;
    const double b = val[size_t(i)] ? -500.0 : double(i % 5);
    csv += std::to_string(a) + "," + (missing_b ? std::string() : std::to_string(b)) + "," +
           std::to_string(i % 2) + "\n";
    if (!val[size_t(i)]) {
      sum_a += a, ++train_rows;
      if (!missing_b) sum_b += b, ++train_b;
    }
  }
  test::write_file(dir, "x.csv", csv);
  const std::string config = test::write_file(dir, "s.yaml", R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 2}]
loss: cross_entropy
optimizer: {type: sgd, lr: 0.01}
data:
  train: {format: csv, path: )" + dir + R"(/x.csv, header: true, label_column: y, normalize: standardize,
          missing: {fill: mean}}
  validation_split: 0.2
  num_classes: 2
  batch_size: 8
train: {epochs: 1, seed: 11}
)");
  auto fit = test::run_trainer("fit " + config + " --out " + dir + "/run");
  INFO(fit.err);
  REQUIRE(fit.exit_code == 0);
  const YAML::Node t = YAML::LoadFile(dir + "/run/config.yaml")["data"]["train"];
  INFO(YAML::Dump(t));
  REQUIRE(t["standardize"]["mean"][0].as<double>() == Approx(sum_a / train_rows).epsilon(1e-6));
  REQUIRE(t["missing"]["values"][1].as<double>() == Approx(sum_b / train_b).epsilon(1e-6));  // b
}

// Categories that look like numbers are text: "1.50" is recorded as 1.50 (not shortened to 1.5
// as a float would be), so predict still knows the category.
TEST_CASE("categories spelled like floats are recorded as written", "[csv][cli]") {
  const std::string dir = test::temp_dir("csv_float_categories");
  std::string csv = "x,grade,y\n";
  const char* grades[] = {"1.50", "2.0", "3"};
  const char* labels[] = {"no", "yes"};  // a label that is a number is a class index
  for (int i = 0; i < 60; ++i)
    csv += std::to_string(i % 5) + "," + grades[i % 3] + "," + labels[(i % 5) > 2 ? 1 : 0] + "\n";
  test::write_file(dir, "t.csv", csv);
  const std::string input = test::write_file(dir, "p.csv", "x,grade\n1,1.50\n4,2.0\n");
  const std::string config =
      test::write_file(dir, "c.yaml",
                       R"(model:
  input_shape: [4]
  layers: [{type: dense, units: 2}]
loss: cross_entropy
optimizer: {type: sgd, lr: 0.1}
data:
  train: {format: csv, path: )" +
                           dir + R"(/t.csv, header: true, label_column: y, categorical_columns: [grade]}
  batch_size: 8
train: {epochs: 1}
)");
  auto fit = test::run_trainer("fit " + config + " --out " + dir + "/run");
  INFO(fit.err);
  REQUIRE(fit.exit_code == 0);
  const std::string recorded = test::slurp(dir + "/run/config.yaml");
  REQUIRE_THAT(recorded, Contains("grade: [1.50, 2.0, 3]"));
  auto p = test::run_trainer("predict " + dir + "/run --input " + input + " --output " + dir + "/o.csv");
  INFO(p.err);
  REQUIRE(p.exit_code == 0);
  REQUIRE_THAT(test::slurp(dir + "/o.csv"), Contains("no,yes"));
}

// Issue 29, item 5: an error about a data file names the config file, line and column of the key
// that names the file, and the key, as a config error does.
TEST_CASE("a data file's error names the config key and its file:line:column", "[csv][cli]") {
  const std::string dir = test::temp_dir("data_error_place");
  test::write_file(dir, "bad.csv", "a,b,label\n1,2,0\n1,abc,1\n");
  const std::string yaml =
      "model:\n  input_shape: [2]\n  layers: [{type: dense, units: 2}]\n"
      "loss: cross_entropy\ndata:\n  train:\n    format: csv\n    header: true\n"
      "    path: " +
      dir + "/PATH\n  num_classes: 2\n";
  const auto with_path = [&](const std::string& p) {
    std::string y = yaml;
    y.replace(y.find("PATH"), 4, p);
    return y;
  };
  test::write_file(dir, "missing.yaml", with_path("nothere.csv"));
  test::write_file(dir, "bad.yaml", with_path("bad.csv"));
  // Missing: found by the check before any data is read.
  auto r = test::run_trainer("fit " + dir + "/missing.yaml --no-out");
  REQUIRE(r.exit_code == 4);
  REQUIRE_THAT(r.err, Catch::Contains("missing.yaml:9:11: data.train.path: cannot open '" + dir +
                                      "/nothere.csv': No such file or directory"));
  // A bad cell: the file's own place follows the config's.
  r = test::run_trainer("fit " + dir + "/bad.yaml --no-out");
  REQUIRE(r.exit_code == 4);
  REQUIRE_THAT(r.err,
               Catch::Contains("bad.yaml:9:11: data.train.path: " + dir +
                               "/bad.csv:3: column 2 ('b'): expected a finite float32 number, found 'abc'"));
  // A path given with --set has no line in the file.
  r = test::run_trainer("fit " + dir + "/bad.yaml --no-out --set data.train.path=" + dir + "/nothere.csv");
  REQUIRE(r.exit_code == 4);
  REQUIRE_THAT(r.err, Catch::Contains("error: --set: data.train.path: cannot open"));
  // A shape that does not fit the model: the source's place, its key said once.
  test::write_file(dir, "good.csv", "a,b,label\n1,2,0\n1,3,1\n");
  test::write_file(dir, "good.yaml", with_path("good.csv"));
  r = test::run_trainer("fit " + dir + "/good.yaml --no-out --set 'model.input_shape=[3]'");
  REQUIRE(r.exit_code == 4);
  REQUIRE_THAT(r.err,
               Catch::Contains("good.yaml:7:5: data.train: samples have shape (2,) but model.input_shape "
                               "is (3,)"));
}
