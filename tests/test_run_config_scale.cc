// A run directory's config.yaml reads the same data from any directory (absolute paths), and
// records the effective data.normalize.scale (1/255 for uint8 training data when not given): fit,
// eval RUN, --resume and predict then agree. predict scales the same pixels identically whether
// they come from a .csv or a uint8 .npy: by the scale of training, whatever the file type.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "datasets/npy_reader.h"
#include "lib/config/config.h"
#include "lib/core/rng.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// Runs in `dir` while alive (the trainer binary inherits the working directory).
class InDirectory {
 public:
  explicit InDirectory(const std::string& dir) : saved_(fs::current_path()) { fs::current_path(dir); }
  ~InDirectory() { fs::current_path(saved_); }
  InDirectory(const InDirectory&) = delete;
  InDirectory& operator=(const InDirectory&) = delete;

 private:
  fs::path saved_;
};

// n uint8 4x4 images of 2 classes: class 0 around 60, class 1 around 190 (seeded noise).
void write_images(const std::string& dir, const std::string& stem, int64_t n, uint64_t seed,
                  std::vector<uint8_t>* pixels, std::vector<int64_t>* labels) {
  SplitMix64 rng(seed);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = int64_t(rng.next_below(2));
    labels->push_back(label);
    for (int k = 0; k < 16; ++k) pixels->push_back(uint8_t((label ? 150 : 20) + rng.next_below(80)));
  }
  write_npy_u8(dir + "/x" + stem + ".npy", {n, 1, 4, 4}, pixels->data());
  write_npy_i64(dir + "/y" + stem + ".npy", {n}, labels->data());
}

const char* kConfig = R"(model:
  input_shape: [1, 4, 4]
  layers: [{type: flatten}, {type: dense, units: 8}, {type: relu}, {type: dense, units: 2}]
loss: cross_entropy
optimizer: {type: sgd, lr: 0.05}
data:
  train: {format: npy, x: x.npy, y: y.npy}
  validation: {format: npy, x: xv.npy, y: yv.npy}
  num_classes: 2
  batch_size: 16
train: {epochs: 2, seed: 3}
)";

// The named column of metrics.csv's row for `epoch`.
std::string metric(const std::string& run, int epoch, const std::string& column) {
  std::istringstream csv(test::slurp(run + "/metrics.csv"));
  std::string header, line;
  std::getline(csv, header);
  std::vector<std::string> names;
  std::stringstream h(header);
  for (std::string c; std::getline(h, c, ',');) names.push_back(c);
  while (std::getline(csv, line)) {
    std::vector<std::string> cells;
    std::stringstream l(line);
    for (std::string c; std::getline(l, c, ',');) cells.push_back(c);
    if (cells.at(0) != std::to_string(epoch)) continue;
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == column) return cells.at(i);
  }
  return "";
}

}  // namespace

TEST_CASE(
    "fit, eval RUN from another directory, --resume and predict agree for uint8 npy data relying on "
    "the default scale",
    "[run_dir][normalize][cli]") {
  const std::string data = test::temp_dir("scale_data"), elsewhere = test::temp_dir("scale_elsewhere");
  std::vector<uint8_t> train_px, val_px;
  std::vector<int64_t> train_y, val_y;
  write_images(data, "", 160, 1, &train_px, &train_y);
  write_images(data, "v", 40, 2, &val_px, &val_y);
  std::string csv;
  for (size_t i = 0; i < 40; ++i) {
    for (size_t k = 0; k < 16; ++k) csv += (k ? "," : "") + std::to_string(int(val_px[i * 16 + k]));
    csv += "\n";
  }
  test::write_file(data, "xv.csv", csv);
  const std::string cfg = test::write_file(data, "u8.yaml", kConfig);
  const std::string run = data + "/run", whole = data + "/whole";
  const std::string abs_x = fs::path(data + "/x.npy").lexically_normal().string();
  {
    InDirectory in(data);  // the config's paths are relative to it
    auto printed = test::run_trainer("fit u8.yaml --print-config");
    REQUIRE(printed.exit_code == 0);
    CHECK_THAT(printed.out, Contains("scale: 0.00392156862745098") && Contains("x: " + abs_x));
    auto fit = test::run_trainer("fit u8.yaml --out " + run + " -q");
    INFO(fit.err);
    REQUIRE(fit.exit_code == 0);
    REQUIRE(test::run_trainer("fit u8.yaml --epochs 3 --out " + whole + " -q").exit_code == 0);
  }
  const std::string recorded = test::slurp(run + "/config.yaml");
  CHECK_THAT(recorded, Contains("scale: 0.00392156862745098") && Contains("x: " + abs_x));
  // The loss is one that the data scaled to [0, 1] gives, not the 0..255 pixels' (tens or more).
  const double fit_val_loss = std::stod(metric(run, 2, "val_loss"));
  CHECK(fit_val_loss < 0.7);

  InDirectory away(elsewhere);
  auto ev = test::run_trainer("eval " + run + " --log-format json");
  INFO(ev.err);
  REQUIRE(ev.exit_code == 0);
  const auto j = nlohmann::json::parse(ev.out);
  CHECK(j.at("loss").get<double>() == Approx(fit_val_loss).epsilon(1e-4));

  // Resumed for a third epoch from elsewhere: the same epoch as an uninterrupted 3-epoch run.
  auto resumed = test::run_trainer("fit --resume " + run + " --epochs 3 -q");
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  CHECK(metric(run, 3, "loss") == metric(whole, 3, "loss"));
  CHECK(metric(run, 3, "val_loss") == metric(whole, 3, "val_loss"));
  CHECK_FALSE(metric(run, 3, "loss").empty());

  // predict: the uint8 .npy and the .csv of the same pixels give the same probabilities, and their
  // cross-entropy is eval's loss.
  REQUIRE(test::run_trainer("predict " + run + " --input " + data + "/xv.npy --output p.npy").exit_code == 0);
  auto from_csv = test::run_trainer("predict " + run + " --input " + data + "/xv.csv --output q.npy");
  INFO(from_csv.err);
  REQUIRE(from_csv.exit_code == 0);
  const NpyArray p = read_npy("p.npy"), q = read_npy("q.npy");
  REQUIRE(p.shape == std::vector<int64_t>{40, 2});
  REQUIRE(q.shape == p.shape);
  double ce = 0;
  for (size_t i = 0; i < 40; ++i) {
    CHECK(q.f32[2 * i] == Approx(p.f32[2 * i]).margin(1e-6));
    ce -= std::log(double(p.f32[2 * i + size_t(val_y[i])]));
  }
  auto ev3 = test::run_trainer("eval " + run + " --log-format json");
  REQUIRE(ev3.exit_code == 0);
  CHECK(ce / 40 == Approx(nlohmann::json::parse(ev3.out).at("loss").get<double>()).epsilon(1e-3));
}

TEST_CASE("a given data.normalize.scale is recorded as given, and a float source's default is 1",
          "[config][normalize]") {
  const std::string dir = test::temp_dir("scale_given");
  std::vector<uint8_t> px;
  std::vector<int64_t> y;
  write_images(dir, "", 4, 1, &px, &y);
  const std::string base =
      std::string(kConfig).replace(std::string(kConfig).find("x: x.npy"), 8, "x: " + dir + "/x.npy");
  const Config defaulted = parse_config(base, "u8.yaml", {"data.validation="});
  CHECK(defaulted.data.normalize.scale == 1.0 / 255.0);
  CHECK(defaulted.resolved["data"]["normalize"]["scale"].as<double>() == 1.0 / 255.0);
  const Config given = parse_config(base, "u8.yaml", {"data.validation=", "data.normalize.scale=0.5"});
  CHECK(given.data.normalize.scale == 0.5);
  CHECK(given.resolved["data"]["normalize"]["scale"].as<double>() == 0.5);
  const Config idx =
      parse_config(base, "u8.yaml", {"data.validation=", "data.train={format: idx, images: a, labels: b}"});
  CHECK(idx.data.normalize.scale == 1.0 / 255.0);
  const Config disc = parse_config(base, "u8.yaml", {"data.validation=", "data.train={format: disc}"});
  CHECK(disc.resolved["data"]["normalize"]["scale"].as<double>() == 1.0);
}
