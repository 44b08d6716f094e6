// A run directory is self-contained: fit --resume RUN and eval RUN need no config argument, the
// interrupt message's command continues the same run, and every path is checked before the data
// is read or the model built.
#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/train/fit.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;

namespace {

// 10 epochs in the file; the runs below ask for 2 and another learning rate on the command line.
const char* kDisc = R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 16}, {type: relu}, {type: dense, units: 2}]
loss: cross_entropy
optimizer: {type: sgd, lr: 0.1}
metrics: [accuracy]
data: {train: {format: disc, samples: 600, seed: 3}, num_classes: 2, batch_size: 50, validation_split: 0.2}
train: {epochs: 10, seed: 5}
)";

nlohmann::json summary_of(const std::string& run) {
  return nlohmann::json::parse(test::slurp(run + "/summary.json"));
}

}  // namespace

TEST_CASE("the command printed on an interrupt continues the same run to the epochs it was started with",
          "[run_dir][resume][cli]") {
  const std::string dir = test::temp_dir("resume_hint");
  const std::string config = test::write_file(dir, "disc.yaml", kDisc);
  const std::string run = dir + "/run";
  Config cfg = load_config(config, {"train.epochs=2", "optimizer.lr=0.05"});
  FitOptions fo;
  fo.out_dir = run;
  fo.stop_after_step = 5;  // as if Ctrl-C came in the middle of epoch 1
  std::ostringstream out;
  std::string message;
  try {
    fit(cfg, fo, out);
  } catch (const InterruptedError& e) {
    message = e.what();
  }
  const std::string marker = "continue with: trainer ";
  const auto at = message.find(marker);
  REQUIRE(at != std::string::npos);
  const std::string hint = message.substr(at + marker.size());
  REQUIRE(hint == "fit --resume " + run);

  auto resumed = test::run_trainer(hint);
  INFO(resumed.err);
  REQUIRE(resumed.exit_code == 0);
  REQUIRE_THAT(resumed.out, Contains("epoch 2/2") && !Contains("epoch 3/"));
  const auto summary = summary_of(run);
  REQUIRE(summary["epochs_run"] == 2);
  REQUIRE(summary["epochs"] == 2);
  REQUIRE(summary["status"] == "completed");
  REQUIRE_THAT(test::slurp(run + "/config.yaml"), Contains("lr: 0.05"));

  // Asking for more epochs extends the run; the run directory then records the new count.
  auto more = test::run_trainer("fit --resume " + run + " --epochs 3");
  REQUIRE(more.exit_code == 0);
  REQUIRE(summary_of(run)["epochs_run"] == 3);
  REQUIRE_THAT(test::slurp(run + "/config.yaml"), Contains("epochs: 3"));
}

TEST_CASE("a run resumed from its own config.yaml ends with the files of an uninterrupted run",
          "[run_dir][resume][cli]") {
  // Without a metrics key the task's defaults are resolved; read back from the run's config.yaml
  // they must resolve the same (they were written '- accuracy', read back as '- type: accuracy',
  // and model.safetensors' config metadata differed from the uninterrupted run's).
  std::string yaml = kDisc;
  yaml.erase(yaml.find("metrics: [accuracy]\n"), std::string("metrics: [accuracy]\n").size());
  const std::string dir = test::temp_dir("resume_files");
  const std::string config = test::write_file(dir, "disc.yaml", yaml);
  REQUIRE(test::run_trainer("fit " + config + " --epochs 3 --threads 1 -q --out " + dir + "/straight")
              .exit_code == 0);
  REQUIRE(test::run_trainer("fit " + config + " --epochs 1 --threads 1 -q --out " + dir + "/run").exit_code ==
          0);
  auto r = test::run_trainer("fit --resume " + dir + "/run --epochs 3 -q");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE(test::slurp(dir + "/run/config.yaml") == test::slurp(dir + "/straight/config.yaml"));
  REQUIRE(test::slurp(dir + "/run/model.safetensors") == test::slurp(dir + "/straight/model.safetensors"));
}

TEST_CASE("eval RUN and predict RUN read the run's config.yaml and final weights", "[run_dir][cli]") {
  const std::string dir = test::temp_dir("eval_run");
  const std::string config = test::write_file(dir, "disc.yaml", kDisc);
  const std::string run = dir + "/run";
  REQUIRE(test::run_trainer("fit " + config + " --epochs 1 --out " + run).exit_code == 0);
  auto ev = test::run_trainer("eval " + run);
  INFO(ev.err);
  REQUIRE(ev.exit_code == 0);
  REQUIRE_THAT(ev.out, Contains("eval " + run + "/model.safetensors on data.validation_split (120 samples)"));
  // The same with the config file and --weights gives the same line.
  auto by_config = test::run_trainer("eval " + config + " --weights " + run);
  REQUIRE(by_config.exit_code == 0);
  REQUIRE(by_config.out.substr(by_config.out.find("] ")) == ev.out.substr(ev.out.find("] ")));
  const std::string input = test::write_file(dir, "x.csv", "0.1,0.2\n0.5,0.5\n0.9,0.0\n");
  auto pred = test::run_trainer("predict " + run + " --input " + input + " --output " + dir + "/p.csv");
  REQUIRE(pred.exit_code == 0);
  REQUIRE_THAT(pred.out, Contains("predicted 3 samples of " + input + " with " + run + "/model.safetensors"));
  // A config file still needs --weights; a directory that is no run says so.
  auto no_weights = test::run_trainer("eval " + config);
  REQUIRE(no_weights.exit_code == 2);
  REQUIRE_THAT(no_weights.err, Contains("--weights is required with a config file"));
  std::filesystem::create_directories(dir + "/not_a_run");
  auto not_run = test::run_trainer("eval " + dir + "/not_a_run");
  REQUIRE(not_run.exit_code == 2);
  REQUIRE_THAT(not_run.err, Contains("not_a_run has no config.yaml"));
  auto fit_dir = test::run_trainer("fit " + run);
  REQUIRE(fit_dir.exit_code == 2);
  REQUIRE_THAT(fit_dir.err, Contains("to continue the run in it: trainer fit --resume " + run));
}

TEST_CASE(
    "the --resume, --out and --weights paths and the data files are checked before the data is read or the "
    "model built",
    "[run_dir][cli]") {
  const std::string dir = test::temp_dir("paths_first");
  // Every later step would fail too: the data file is missing and the model does not fit the data
  // (num_classes 3 against 2 outputs). The path error must come first.
  std::string text = kDisc;
  text.replace(text.find("{format: disc, samples: 600, seed: 3}"), 37,
               "{format: npy, x: " + dir + "/missing_x.npy, y: " + dir + "/missing_y.npy}");
  const std::string config = test::write_file(dir, "bad.yaml", text);
  const std::string bad_model = " --set data.num_classes=3";

  auto resume = test::run_trainer("fit " + config + bad_model + " --resume " + dir + "/nowhere");
  REQUIRE(resume.exit_code == 2);
  REQUIRE_THAT(resume.err, Contains("--resume " + dir + "/nowhere: no such run directory"));
  test::write_file(dir, "afile", "x");
  auto out = test::run_trainer("fit " + config + bad_model + " --out " + dir + "/afile/sub");
  REQUIRE(out.exit_code == 2);
  REQUIRE_THAT(out.err, Contains("cannot create the directory"));
  auto weights = test::run_trainer("eval " + config + bad_model + " --weights " + dir + "/none.safetensors");
  REQUIRE(weights.exit_code == 2);
  REQUIRE_THAT(weights.err, Contains("--weights " + dir + "/none.safetensors: no such file or directory"));
  // The data file, before the model: exit 4, not the model's config error (3); and a failed
  // start leaves no empty run directory behind.
  auto data = test::run_trainer("fit " + config + bad_model + " --out " + dir + "/fresh");
  REQUIRE(data.exit_code == 4);
  REQUIRE_THAT(data.err, Contains("cannot open '" + dir + "/missing_x.npy'"));
  REQUIRE_FALSE(std::filesystem::exists(dir + "/fresh"));
  auto eval_data = test::run_trainer("eval " + config + bad_model + " --weights " + config);
  REQUIRE(eval_data.exit_code == 4);
  REQUIRE_THAT(eval_data.err, Contains("missing_x.npy"));
}
