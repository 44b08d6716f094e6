// The non-finite guard and train.on_nan: the backend ops (check, skip, commit), a run that
// diverges with on_nan: stop (exit 5, the epoch and step named, the last good checkpoint kept,
// summary.json and the end event written), on_nan: skip, and the warning for a growing loss.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kernels/cpu/cpu_backend.h"
#include "lib/backend/step_kernels.h"
#include "lib/config/config.h"
#include "lib/train/divergence.h"
#include "lib/train/fit.h"
#include "tests/test_util.h"
#include "tests/warning_sink.h"

using namespace trainer;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// SGD at lr 1e6 overflows the weights within a few steps of epoch 1 (step 6 on this data).
const char* kTiny = R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 16}, {type: relu}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: sgd, lr: 0.1}
data: {train: {format: disc, samples: 500, seed: 3}, num_classes: 2, batch_size: 10, validation_split: 0.2}
train: {epochs: 1, seed: 7}
)";

std::string last_line(const std::string& text) {
  std::string t = text;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  return t.substr(t.rfind('\n') + 1);
}

}  // namespace

TEST_CASE("the guard's check flags NaN and infinities, and only them, in the step's scalars",
          "[divergence][ops]") {
  CpuBackend be;
  const std::unique_ptr<GuardKernel> guard = StepKernelRegistry::global().guard(be);
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> fine{0.f, -1.f, 3.4e38f, -3.4e38f, 1e-45f, -0.f};
  StepScalars s;
  guard->check(fine.data(), int64_t(fine.size()), kNonfiniteGradients, &s);
  REQUIRE(s.nonfinite == 0);
  for (float bad : {inf, -inf, nan}) {
    std::vector<float> x(100001, 1.f);  // above the threading threshold
    x[77777] = bad;
    StepScalars t;
    t.nonfinite = kNonfiniteLoss;
    guard->check(x.data(), int64_t(x.size()), kNonfiniteWeights, &t);
    REQUIRE(t.nonfinite == (kNonfiniteLoss | kNonfiniteWeights));
  }
}

// The optimizers' skip of a flagged step: tests/test_optimizers.cc, for every optimizer.

TEST_CASE("the guard's commit adds a finite step's loss and records a non-finite one instead",
          "[divergence][ops]") {
  CpuBackend be;
  const std::unique_ptr<GuardKernel> guard = StepKernelRegistry::global().guard(be);
  float loss_sum = 1.5f;
  NonfiniteRecord r;
  StepScalars s;
  s.step = 4;
  s.batch_loss = 2.f;
  guard->commit(&s, 10, &loss_sum, &r);
  REQUIRE(loss_sum == 3.5f);
  REQUIRE(r.steps == 0);
  s.step = 6;
  s.batch_loss = std::nanf("");
  s.nonfinite = kNonfiniteLoss | kNonfiniteGradients;
  guard->commit(&s, 10, &loss_sum, &r);
  s.step = 7;
  s.nonfinite = kNonfiniteWeights;
  guard->commit(&s, 8, &loss_sum, &r);
  REQUIRE(loss_sum == 3.5f);
  REQUIRE(r.first_step == 7);  // update numbers are 1-based
  REQUIRE(r.first_what == (kNonfiniteLoss | kNonfiniteGradients));
  REQUIRE(r.steps == 2);
  REQUIRE(r.samples == 18);
  REQUIRE(r.what == (kNonfiniteLoss | kNonfiniteGradients | kNonfiniteWeights));
}

TEST_CASE(
    "a diverging run stops with exit 5 naming epoch and step, keeps the last good checkpoint and its records",
    "[divergence][cli]") {
  std::string dir = test::temp_dir("diverge");
  std::string cfg = test::write_file(dir, "tiny.yaml", kTiny);
  const std::string run = dir + "/run";
  REQUIRE(test::run_trainer("fit " + cfg + " --out " + run).exit_code == 0);
  const std::string ck = run + "/checkpoints/epoch-0001.safetensors";
  const std::string good = test::slurp(ck), final_weights = test::slurp(run + "/model.safetensors");

  auto r = test::run_trainer("fit " + cfg + " --resume " + run + " --epochs 3 --set optimizer.lr=1e6");
  REQUIRE(r.exit_code == 5);
  REQUIRE_THAT(last_line(r.err),
               Contains("error: the training diverged: non-finite loss and gradients at epoch 2, step ") &&
                   Contains("the last good checkpoint is " + ck) && Contains("train.on_nan: skip"));
  REQUIRE(r.out.find("epoch 2/3") == std::string::npos);
  REQUIRE(test::slurp(ck) == good);  // kept, not overwritten with the bad weights
  REQUIRE(test::slurp(run + "/model.safetensors") == final_weights);
  REQUIRE_FALSE(fs::exists(run + "/checkpoints/epoch-0002.safetensors"));

  auto summary = nlohmann::json::parse(test::slurp(run + "/summary.json"));
  REQUIRE(summary["status"] == "diverged");
  REQUIRE(summary["diverged"]["epoch"] == 2);
  REQUIRE(summary["diverged"]["step"].get<int64_t>() > 40);  // epoch 1 had 40 steps
  REQUIRE(summary["last_good_checkpoint"] == ck);
  auto end = nlohmann::json::parse(last_line(test::slurp(run + "/events.jsonl")));
  REQUIRE(end["event"] == "end");
  REQUIRE(end["status"] == "diverged");
}

TEST_CASE("with train.on_nan: skip the non-finite batches are skipped, counted and reported",
          "[divergence]") {
  // The data it was tuned on: Keras' last-rows split (with the seeded default split, every batch
  // of epoch 2 overflows and the run stops as diverged instead).
  Config cfg =
      parse_config(kTiny, "tiny.yaml",
                   {"optimizer.lr=1e6", "train.on_nan=skip", "train.epochs=2", "train.divergence=warn",
                    "data.validation_split=", "data.split={fraction: 0.2, shuffle: false}"});
  std::string run = test::temp_dir("skip") + "/run";
  FitOptions fo;
  fo.out_dir = run;
  std::ostringstream out;
  FitResult r = [&] {
    test::ExpectWarning skipped("batch(es) with a non-finite");
    test::ExpectWarning grew("probably diverged");
    return fit(cfg, fo, out);
  }();
  REQUIRE(r.epochs_run == 2);
  REQUIRE_THAT(out.str(), Contains("epoch 1/2 loss=") && Contains(" skipped="));
  auto summary = nlohmann::json::parse(test::slurp(run + "/summary.json"));
  REQUIRE(summary["status"] == "completed");
  REQUIRE(summary["skipped_batches"].get<int64_t>() > 0);
  REQUIRE(summary["skipped_batches"].get<int64_t>() <= 80);
  REQUIRE(std::isfinite(r.final_train_loss));
}

TEST_CASE(
    "a loss that grows by orders of magnitude stops the run, or with divergence: warn is warned about once",
    "[divergence]") {
  LossGrowthWatch w;
  REQUIRE(w.on_epoch(1, 2.3).empty());
  REQUIRE(w.on_epoch(2, 200.0).empty());  // < 100x
  REQUIRE_THAT(w.on_epoch(3, 2.3e5), Contains("grew from 2.3 (epoch 1) to 2.3e+05 (epoch 3)"));
  REQUIRE(w.on_epoch(4, 1e9).empty());  // once
  LossGrowthWatch absolute;
  REQUIRE_THAT(absolute.on_epoch(1, 4e29), Contains("the training loss is 4e+29 at epoch 1"));
  LossGrowthWatch regression(false);  // a regression's loss has its targets' units: no absolute limit
  REQUIRE(regression.on_epoch(1, 4e9).empty());
  REQUIRE_THAT(regression.on_epoch(2, 4e12), Contains("grew from"));

  {  // the default, train.divergence: stop: exit 5 (RuntimeError), status diverged, no epoch saved
    Config cfg = parse_config(kTiny, "tiny.yaml", {"optimizer={type: adam, lr: 1.0e6}", "train.epochs=2"});
    std::string run = test::temp_dir("growth_stop") + "/run";
    FitOptions fo;
    fo.out_dir = run;
    std::ostringstream out;
    REQUIRE_THROWS_AS(fit(cfg, fo, out), RuntimeError);
    REQUIRE_THROWS_WITH(fit(cfg, FitOptions{}, out),
                        Contains("the training diverged: the training loss") && Contains("divergence: warn"));
    auto summary = nlohmann::json::parse(test::slurp(run + "/summary.json"));
    REQUIRE(summary["status"] == "diverged");
  }
  Config cfg = parse_config(kTiny, "tiny.yaml",
                            {"optimizer={type: adam, lr: 1.0e6}", "train.epochs=2", "train.divergence=warn"});
  std::string run = test::temp_dir("growth") + "/run";
  FitOptions fo;
  fo.out_dir = run;
  std::ostringstream out;
  {
    test::ExpectWarning grew("probably diverged");  // logged, and kept in summary.json
    fit(cfg, fo, out);
  }
  auto summary = nlohmann::json::parse(test::slurp(run + "/summary.json"));
  REQUIRE(summary["warnings"].size() == 1);
  REQUIRE_THAT(summary["warnings"][0].get<std::string>(), Contains("probably diverged"));
}
