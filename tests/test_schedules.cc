// Training controls: learning-rate schedules at given steps, the config keys that set them,
// early stopping (the stopping epoch and the restored weights) and gradient clipping.
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lib/checkpoint/safetensors.h"
#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/train/callbacks.h"
#include "lib/train/fit.h"
#include "lib/train/schedules.h"
#include "lib/train/session.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;

namespace {

const char* kDisc = R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 32}, {type: relu}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: sgd, lr: 0.1}
data: {train: {format: disc, samples: 400, seed: 3}, num_classes: 2, batch_size: 32, validation_split: 0.2}
train: {epochs: 4, seed: 11}
)";

LrSchedule schedule(const std::string& section, double lr, int64_t steps_per_epoch, int64_t epochs,
                    std::vector<std::string> sets = {}) {
  sets.push_back("schedule=" + section);
  sets.push_back("optimizer.lr=" + std::to_string(lr));
  Config c = parse_config(kDisc, "s.yaml", sets);
  return LrSchedule(c.schedule, c.optimizer.lr, steps_per_epoch, epochs);
}

MetricList val_loss(double v) { return {{"loss", v}}; }

std::vector<float> weights_of(const std::string& path) {
  SafetensorsFile f = read_safetensors(path);
  std::vector<float> all;
  for (const auto& n : f.names) all.insert(all.end(), f.tensors[n].data.begin(), f.tensors[n].data.end());
  return all;
}

FitResult run(const std::vector<std::string>& sets, const std::string& out_dir,
              std::string* printed = nullptr) {
  Config cfg = parse_config(kDisc, "disc.yaml", sets);
  FitOptions fo;
  fo.out_dir = out_dir;
  std::ostringstream out;
  FitResult r = fit(cfg, fo, out);
  if (printed) *printed = out.str();
  return r;
}

}  // namespace

TEST_CASE("learning-rate schedules give the documented values at given steps", "[schedule]") {
  SECTION("constant, with and without warmup") {
    REQUIRE(schedule("constant", 0.1, 10, 5).lr_at(37) == Approx(0.1));
    auto w = schedule("{type: constant, warmup_epochs: 1}", 0.1, 10, 5);
    REQUIRE(w.lr_at(1) == Approx(0.01));
    REQUIRE(w.lr_at(5) == Approx(0.05));
    REQUIRE(w.lr_at(10) == Approx(0.1));
    REQUIRE(w.lr_at(11) == Approx(0.1));
  }
  SECTION("step: gamma every step_size epochs") {
    auto s = schedule("{type: step, step_size: 2, gamma: 0.5}", 0.1, 10, 6);
    REQUIRE(s.lr_at(1) == Approx(0.1));
    REQUIRE(s.lr_at(20) == Approx(0.1));
    REQUIRE(s.lr_at(21) == Approx(0.05));
    REQUIRE(s.lr_at(41) == Approx(0.025));
  }
  SECTION("exponential: gamma per epoch") {
    auto s = schedule("{type: exponential, gamma: 0.9}", 0.1, 10, 6);
    REQUIRE(s.lr_at(10) == Approx(0.1));
    REQUIRE(s.lr_at(11) == Approx(0.09));
    REQUIRE(s.lr_at(25) == Approx(0.081));
  }
  SECTION("cosine with linear warmup") {
    auto s = schedule("{type: cosine, warmup_steps: 10, min_lr: 0.01}", 0.1, 10, 5);  // 50 updates
    REQUIRE(s.lr_at(5) == Approx(0.05));
    REQUIRE(s.lr_at(10) == Approx(0.1));
    REQUIRE(s.lr_at(30) == Approx(0.055));  // halfway through the cosine part
    REQUIRE(s.lr_at(40) == Approx(0.01 + 0.09 * 0.5 * (1 + std::cos(M_PI * 0.75))));
    REQUIRE(s.lr_at(50) == Approx(0.01));
    REQUIRE(s.lr_at(60) == Approx(0.01));
  }
  SECTION("reduce_on_plateau: factor after patience bad epochs, floored at min_lr, state survives a resume") {
    auto s = schedule(
        "{type: reduce_on_plateau, monitor: val_loss, patience: 1, factor: 0.5, min_delta: 0, min_lr: 0.03}",
        0.1, 10, 20);
    const std::vector<double> seq{1.0, 0.9, 0.95, 0.95, 0.96, 0.97, 0.98, 0.99};
    const std::vector<double> lr_after{0.1, 0.1, 0.1, 0.05, 0.05, 0.03, 0.03, 0.03};
    for (size_t e = 0; e < seq.size(); ++e) {
      INFO("epoch " << e + 1);
      s.on_epoch_end(int64_t(e + 1), {}, val_loss(seq[e]));
      REQUIRE(s.lr_at(int64_t(e + 1) * 10 + 1) == Approx(lr_after[e]));
      if (e == 3) {  // a resumed run continues from the saved state
        auto copy = schedule(
            "{type: reduce_on_plateau, monitor: val_loss, patience: 1, factor: 0.5, min_delta: 0, min_lr: "
            "0.03}",
            0.1, 10, 20);
        copy.restore(nlohmann::json::parse(s.state().dump()));
        REQUIRE(copy.lr_at(41) == Approx(0.05));
        copy.on_epoch_end(5, {}, val_loss(0.96));
        copy.on_epoch_end(6, {}, val_loss(0.97));
        REQUIRE(copy.lr_at(61) == Approx(0.03));
      }
    }
  }
}

TEST_CASE("schedule, early_stopping, checkpoint and clip_grad_norm keys are validated",
          "[schedule][config]") {
  REQUIRE_THROWS_WITH(parse_config(kDisc, "s.yaml", {"schedule={type: cosine, gamma: 0.5}"}),
                      Contains("unknown key 'schedule.gamma'"));
  REQUIRE_THROWS_WITH(parse_config(kDisc, "s.yaml", {"schedule={type: cosin}"}),
                      Contains("did you mean 'cosine'"));
  REQUIRE_THROWS_WITH(parse_config(kDisc, "s.yaml", {"early_stopping={monitor: val_acuracy}"}),
                      Contains("early_stopping.monitor") && Contains("did you mean 'val_accuracy'"));
  REQUIRE_THROWS_WITH(parse_config(kDisc, "s.yaml", {"data.validation_split=0", "checkpoint.best=val_loss"}),
                      Contains("there is no validation data"));
  REQUIRE_THROWS_WITH(parse_config(kDisc, "s.yaml", {"schedule={warmup_steps: 5, warmup_epochs: 1}"}),
                      Contains("cannot be combined"));
  REQUIRE_THROWS_AS(parse_config(kDisc, "s.yaml", {"clip_grad_norm=-1"}), ConfigError);
  Config c = parse_config(kDisc, "s.yaml", {"early_stopping={patience: 3}"});
  REQUIRE(c.early_stopping.enabled);
  REQUIRE(c.early_stopping.monitor == "val_loss");
  REQUIRE(c.early_stopping.mode == MonitorMode::min);
  REQUIRE(c.checkpoint.best == "val_loss");  // follows early stopping's monitor
  Config d = parse_config(kDisc, "s.yaml", {});
  REQUIRE_FALSE(d.early_stopping.enabled);
  REQUIRE(d.checkpoint.best == "val_accuracy");
  REQUIRE(d.schedule.type == "constant");
  REQUIRE(d.resolved["checkpoint"]["keep_last"].as<int>() == 3);
}

TEST_CASE("early stopping waits patience epochs without improvement, then stops",
          "[schedule][early_stopping]") {
  EarlyStoppingConfig c;
  c.enabled = true;
  c.monitor = "val_accuracy";
  c.mode = MonitorMode::max;
  c.patience = 2;
  c.min_delta = 0.01;
  EarlyStopping es(c);
  const std::vector<double> acc{0.50, 0.60, 0.605, 0.70, 0.69, 0.705, 0.71};
  int64_t stopped = 0;
  for (size_t e = 0; e < acc.size() && !stopped; ++e) {
    bool improved = false;
    if (es.on_epoch_end(int64_t(e + 1), {}, {{"accuracy", acc[e]}}, &improved)) stopped = int64_t(e + 1);
  }
  REQUIRE(stopped == 6);  // 0.69 and 0.705 do not beat 0.70 by more than 0.01
  REQUIRE(es.best_epoch() == 4);
  REQUIRE(es.best() == Approx(0.70));
}

TEST_CASE("early stopping stops fit at the right epoch and restores the best weights",
          "[schedule][early_stopping]") {
  std::string dir = test::temp_dir("early");
  // min_delta so large that only the first epoch counts as an improvement: stop after 1 + patience.
  std::string printed;
  FitResult r = run({"train.epochs=10", "early_stopping={monitor: val_loss, patience: 2, min_delta: 1000}"},
                    dir + "/stopped", &printed);
  REQUIRE(r.stopped_early);
  REQUIRE(r.epochs_run == 3);
  REQUIRE_THAT(printed, Contains("early stopping at epoch 3") && Contains("restored the weights of epoch 1"));
  FitResult one = run({"train.epochs=1"}, dir + "/one");
  REQUIRE(one.epochs_run == 1);
  REQUIRE(weights_of(dir + "/stopped/model.safetensors") == weights_of(dir + "/one/model.safetensors"));
  // The resumable checkpoint keeps the last epoch's weights; resuming has nothing left to do.
  REQUIRE(weights_of(dir + "/stopped/checkpoints/epoch-0003.safetensors") !=
          weights_of(dir + "/one/model.safetensors"));
  Config cfg =
      parse_config(kDisc, "disc.yaml",
                   {"train.epochs=10", "early_stopping={monitor: val_loss, patience: 2, min_delta: 1000}"});
  FitOptions fo;
  fo.resume_dir = dir + "/stopped";
  std::ostringstream out;
  FitResult again = fit(cfg, fo, out);
  REQUIRE(again.epochs_run == 3);
  REQUIRE(weights_of(dir + "/stopped/model.safetensors") == weights_of(dir + "/one/model.safetensors"));
  REQUIRE_THAT(out.str(), Contains("stopped early at epoch 3"));
}

TEST_CASE("restore_best, the done line, summary.json and best.safetensors name the same best epoch",
          "[schedule][early_stopping][best]") {
  // val_loss falls 0.301 -> 0.233 -> ...: epoch 2 is lower, but not by more than min_delta 0.1, so
  // early stopping's best is epoch 1. Before one tracker, best.safetensors and summary.json said
  // epoch 2 (they ignored min_delta) while restore_best put back epoch 1.
  std::string dir = test::temp_dir("best");
  std::string printed;
  FitResult r = run({"train.epochs=10", "early_stopping={monitor: val_loss, patience: 1, min_delta: 0.1}"},
                    dir, &printed);
  REQUIRE(r.stopped_early);
  REQUIRE(r.epochs_run == 2);
  REQUIRE(r.best_epoch == 1);
  REQUIRE(r.monitor == "val_loss");
  REQUIRE_THAT(printed, Contains("restored the weights of epoch 1") && Contains("(epoch 1) total="));
  const auto summary = nlohmann::json::parse(test::slurp(dir + "/summary.json"));
  REQUIRE(summary["best_epoch"] == 1);
  REQUIRE(summary["monitor"] == "val_loss");
  REQUIRE(summary["best_value"].get<double>() == Approx(r.best_value));
  SafetensorsFile best = read_safetensors(dir + "/checkpoints/best.safetensors");
  REQUIRE(best.metadata["epoch"] == "1");
  REQUIRE(best.metadata["monitor"] == "val_loss");
  REQUIRE(weights_of(dir + "/checkpoints/best.safetensors") == weights_of(dir + "/model.safetensors"));
  const std::string events = test::slurp(dir + "/events.jsonl");
  REQUIRE_THAT(events, Contains(R"("event":"best","epoch":1)"));
  REQUIRE_THAT(events, !Contains(R"("event":"best","epoch":2)"));
}

TEST_CASE("restore_best with a checkpoint.best of another monitor is a config error naming both",
          "[schedule][early_stopping][best]") {
  std::string dir = test::temp_dir("best_conflict");
  REQUIRE_THROWS_AS(run({"early_stopping={monitor: val_loss, patience: 1}", "checkpoint.best=val_accuracy",
                         "metrics=[accuracy]"},
                        dir),
                    ConfigError);
  REQUIRE_THROWS_WITH(run({"early_stopping={monitor: val_loss, patience: 1}", "checkpoint.best=val_accuracy",
                           "metrics=[accuracy]"},
                          dir),
                      Contains("checkpoint.best is 'val_accuracy' but early_stopping.monitor is 'val_loss'"));
  // Without restore_best nothing is restored, so the two may differ: best.safetensors follows
  // checkpoint.best.
  FitResult r = run({"early_stopping={monitor: val_loss, patience: 1, restore_best: false}",
                     "checkpoint.best=val_accuracy", "metrics=[accuracy]"},
                    dir + "/free");
  REQUIRE(r.monitor == "val_accuracy");
}

TEST_CASE("clip_grad_norm scales the gradient to the maximum global norm", "[schedule][clip]") {
  // One SGD step (32 samples, batch 32, no validation): w1 - w0 = -lr * clipped gradient.
  const std::vector<std::string> one_step{"data.train.samples=32", "data.validation_split=0",
                                          "train.epochs=1"};
  std::string dir = test::temp_dir("clip");
  auto sets = one_step;
  sets.push_back("clip_grad_norm=0.001");
  run(sets, dir + "/clipped");
  Config cfg = parse_config(kDisc, "disc.yaml", one_step);
  auto model = make_model(cfg);
  std::vector<float> w0(size_t(model->param_arena_floats())), buf(1);
  model->initialize(w0.data(), buf.data(), cfg.seed);
  SafetensorsFile f = read_safetensors(dir + "/clipped/model.safetensors");
  double sq = 0;
  for (const TensorSlot& t : model->params())
    for (int64_t i = 0; i < t.shape.numel(); ++i) {
      const double d = double(f.tensors[t.name].data[size_t(i)]) - double(w0[size_t(t.offset + i)]);
      sq += d * d;
    }
  REQUIRE(std::sqrt(sq) == Approx(0.1 * 0.001).epsilon(0.01));

  // A bound above the gradient's norm changes nothing, bit for bit.
  auto loose = one_step;
  loose.push_back("clip_grad_norm=1000");
  run(loose, dir + "/loose");
  run(one_step, dir + "/plain");
  REQUIRE(weights_of(dir + "/loose/model.safetensors") == weights_of(dir + "/plain/model.safetensors"));
}
