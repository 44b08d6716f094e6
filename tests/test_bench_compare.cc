// trainer bench without a config (the matmul) and with --sweep mlp-depth: CPU and every GPU, the
// ratio and the crossover, --log-format json and --out files for scripts/plot.py. On a machine
// without a GPU they print the CPU column and say why there is no GPU.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "datasets/csv_records.h"
#include "lib/core/error.h"
#include "lib/train/bench_matmul.h"
#include "lib/train/bench_sweep.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;

namespace {

// Data rows of a CSV file, as fields.
std::vector<std::vector<std::string>> csv_rows(const std::string& path) {
  const std::string text = test::slurp(path);
  CsvRecords records(text, ',', path);
  std::vector<std::string_view> fields;
  std::vector<std::vector<std::string>> rows;
  while (records.next(&fields)) rows.emplace_back(fields.begin(), fields.end());
  return rows;
}

SweepRow row(int64_t depth, double cpu, double gpu) {
  SweepRow r;
  r.depth = depth;
  r.cells["cpu"].seconds = cpu;
  r.cells["gpu:0"].seconds = gpu;
  return r;
}

}  // namespace

TEST_CASE("the GPU wins from the first depth after which it is faster at every depth", "[bench]") {
  REQUIRE(gpu_wins_from({row(2, 1, 3), row(3, 1, 0.5), row(4, 2, 3), row(5, 4, 1), row(6, 9, 1)}, "gpu:0") ==
          3);
  REQUIRE(gpu_wins_from({row(2, 1, 0.5), row(3, 2, 1)}, "gpu:0") == 0);
  REQUIRE(gpu_wins_from({row(2, 1, 3), row(3, 1, 3)}, "gpu:0") == -1);
  REQUIRE(gpu_wins_from({row(2, 1, 0.5), row(3, 1, 3)}, "gpu:0") == -1);  // slower at the deepest
  REQUIRE(gpu_wins_from({row(2, 1, 0.5)}, "gpu:1") == -1);                // no such column
}

TEST_CASE("bench --size takes MxKxN and refuses what is not one tensor", "[bench]") {
  const MatmulShape s = parse_matmul_shape("10000x100x100000");
  REQUIRE(s.flops() == 2e11);
  REQUIRE(s.str() == "(10000 x 100) x (100 x 100000)");
  REQUIRE_THROWS_AS(parse_matmul_shape("10x10"), UsageError);
  REQUIRE_THROWS_AS(parse_matmul_shape("10x0x10"), UsageError);
  REQUIRE_THROWS_AS(parse_matmul_shape("10x10x10x"), UsageError);
  REQUIRE_THROWS_WITH(parse_matmul_shape("100000x10x100000"), Contains("exceeds one tensor"));
}

TEST_CASE("bench without a config times the matmul on the CPU and every GPU, checked against float64",
          "[bench][cli]") {
  const std::string dir = test::temp_dir("bench_matmul");
  auto r = test::run_trainer("bench --size 300x40x500 --repeat 2 --log-format json --out " + dir + "/mm.csv");
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  REQUIRE(j["bench"] == "matmul");
  REQUIRE(j["flops"] == 2.0 * 300 * 40 * 500);
  REQUIRE(j["results"][0]["device"] == "cpu");
  REQUIRE(j["results"].size() == (j["gpu_unavailable"].is_null() ? 1 + j["cpu_over_gpu"].size() : 1));
  for (const auto& t : j["results"]) {
    REQUIRE(t["seconds"].get<double>() > 0);
    REQUIRE(t["max_rel_error"].get<double>() < 1e-5);
  }
  const auto rows = csv_rows(dir + "/mm.csv");
  REQUIRE(rows.size() == 1 + j["results"].size());
  REQUIRE(rows[0][0] == "bench");
  REQUIRE(rows[1][0] == "matmul");
  REQUIRE(rows[1][1] == "cpu");
  REQUIRE(rows[1][3] == "300");
  auto text = test::run_trainer("bench --size 300x40x500 --repeat 1");
  REQUIRE(text.exit_code == 0);
  REQUIRE_THAT(text.out, Contains("matmul (300 x 40) x (40 x 500) fp32") && Contains("\ncpu "));
  if (j["gpu_unavailable"].is_string()) {
    REQUIRE_THAT(text.out, Contains("GPU: not available (") && Contains("); no ratio"));
  } else {
    REQUIRE_THAT(text.out, Contains("GPU 0: ") && Contains("than the CPU (CPU "));
  }
}

TEST_CASE("bench --sweep mlp-depth prints depth, parameters and seconds per device and writes them",
          "[bench][cli]") {
  const std::string dir = test::temp_dir("bench_sweep");
  const std::string config = std::string(TRAINER_SOURCE_DIR) + "/configs/mlp_disc.yaml";
  auto r = test::run_trainer("bench --sweep mlp-depth " + config +
                             " --from 2 --to 4 --steps 15 --json --out " + dir + "/sweep.json");
  REQUIRE(r.exit_code == 0);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  REQUIRE(j == nlohmann::json::parse(test::slurp(dir + "/sweep.json")));
  REQUIRE(j["bench"] == "mlp-depth");
  REQUIRE(j["steps"] == 15);
  REQUIRE(j["steps_per_epoch"] == 10);
  REQUIRE(j["rows"].size() == 3);
  // 2 -> 4 -> 2 logits; then widths double: 2->4->8->2, 2->4->8->16->2.
  REQUIRE(j["rows"][0]["params"] == 22);
  REQUIRE(j["rows"][1]["params"] == 70);
  REQUIRE(j["rows"][2]["params"] == 230);
  for (const auto& row : j["rows"]) {
    REQUIRE(row["results"]["cpu"]["seconds"].get<double>() > 0);
    REQUIRE(row["results"]["cpu"]["final_loss"].get<double>() > 0);
    REQUIRE(row["results"].size() == j["devices"].size());
  }
  REQUIRE(j["gpu_wins_from"].size() + 1 == j["devices"].size());
  auto text = test::run_trainer("bench --sweep mlp-depth " + config + " --from 3 --to 3 --steps 5 --out " +
                                dir + "/sweep.csv");
  REQUIRE(text.exit_code == 0);
  REQUIRE_THAT(text.out, Contains("depth       params      CPU s") && Contains("\n    3           70 "));
  const auto rows = csv_rows(dir + "/sweep.csv");
  REQUIRE(rows[0] == std::vector<std::string>{"bench", "depth", "params", "device", "description", "steps",
                                              "seconds", "epoch_seconds", "final_loss"});
  REQUIRE(rows[1][0] == "mlp-depth");
  REQUIRE(rows[1][1] == "3");
  REQUIRE(rows[1][3] == "cpu");
}

TEST_CASE("bench's comparisons refuse --device, a wrong --out and a config without an mlp", "[bench][cli]") {
  const std::string dir = test::temp_dir("bench_bad");
  auto dev = test::run_trainer("bench --device cpu --size 10x10x10");
  REQUIRE(dev.exit_code == 2);
  REQUIRE_THAT(dev.err,
               Contains("error: --device: the matmul and the sweeps run on the CPU and on every GPU"));
  auto out = test::run_trainer("bench --size 10x10x10 --out " + dir + "/x.png");
  REQUIRE(out.exit_code == 2);
  REQUIRE_THAT(out.err, Contains("--out " + dir + "/x.png: expected a .csv or .json file"));
  auto missing = test::run_trainer("bench --size 10x10x10 --out " + dir + "/none/x.csv");
  REQUIRE(missing.exit_code == 2);
  const std::string cnn = std::string(TRAINER_SOURCE_DIR) + "/configs/fashion_mnist_cnn.yaml";
  auto no_mlp = test::run_trainer("bench --sweep mlp-depth " + cnn + " --to 2 --steps 1");
  REQUIRE(no_mlp.exit_code == 3);
  REQUIRE_THAT(no_mlp.err, Contains("the first layer must be an mlp"));
  auto size = test::run_trainer("bench --size 10x10");
  REQUIRE(size.exit_code == 2);
  REQUIRE_THAT(size.err, Contains("--size 10x10: expected MxKxN"));
}

TEST_CASE("bench counts a step's FLOPs: 3 forwards of the convolutions and matrix products", "[bench]") {
  // mnist_cnn per sample: conv 1->10 5x5 on 28x28 (10 x 24 x 24 outputs x 25 MACs), conv 10->20
  // 5x5 (20 x 8 x 8 x 250), dense 320->50 and 50->10; a multiply-add is 2 FLOPs.
  const double forward = 2.0 * (10 * 24 * 24 * 25 + 20 * 8 * 8 * 250 + 320 * 50 + 50 * 10);
  auto r =
      test::run_trainer("bench " + std::string(TRAINER_SOURCE_DIR) +
                        "/configs/mnist_cnn.yaml --device cpu --steps 2 --warmup 0 --batch-size 8 --json");
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  CHECK(j.at("flops_per_step").get<double>() == Approx(3 * forward * 8));
  CHECK(j.at("tflops").get<double>() > 0);
  CHECK(j.at("mfu").is_null());  // no peak known for CPUs
}
