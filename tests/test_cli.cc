// The trainer binary as users run it: exit codes and messages for good and bad input, summary.
#include <catch2/catch.hpp>
#include <filesystem>

#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;

static const std::string kCfg = std::string(TRAINER_SOURCE_DIR) + "/configs/fashion_mnist_cnn.yaml";

TEST_CASE("summary of the Fashion-MNIST CNN reports 21,840 parameters", "[cli]") {
  auto r = test::run_trainer("summary " + kCfg);
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.out,
               Contains("Total params: 21,840") && Contains("(None, 20, 4, 4)") && Contains("(None, 320)"));
}

TEST_CASE("usage errors exit 2, config errors exit 3 naming the key and line, data errors exit 4", "[cli]") {
  REQUIRE(test::run_trainer("fit").exit_code == 2);
  REQUIRE(test::run_trainer("frobnicate").exit_code == 2);
  REQUIRE(test::run_trainer("fit " + kCfg + " --epochs zero").exit_code == 2);
  REQUIRE(test::run_trainer("fit " + kCfg + " --device tpu").exit_code == 2);

  std::string dir = test::temp_dir("cli");
  std::string bad = test::write_file(dir, "bad.yaml",
                                     "model:\n  input_shape: [4]\n  layers: [{type: dense, units: 2}]\n"
                                     "data: {train: {format: random}, num_classes: 2}\n"
                                     "trian: {epochs: 1}\n");
  auto r = test::run_trainer("fit " + bad);
  REQUIRE(r.exit_code == 3);
  REQUIRE_THAT(
      r.err, Contains("bad.yaml:5:1") && Contains("unknown key 'trian'") && Contains("did you mean 'train'"));
  REQUIRE(r.out.empty());  // failed before training

  auto missing = test::run_trainer("fit " + kCfg + " --set data.train.images=/nonexistent/x.gz --epochs 1");
  REQUIRE(missing.exit_code == 4);
  REQUIRE_THAT(missing.err, Contains("/nonexistent/x.gz"));
  REQUIRE_THAT(missing.err, !Contains("terminate called"));
}

TEST_CASE("fit --print-config prints the resolved config with defaults and overrides and exits", "[cli]") {
  auto r = test::run_trainer("fit " + kCfg + " --print-config --set optimizer.lr=0.5 --epochs 3");
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.out, Contains("lr: 0.5") && Contains("epochs: 3") && Contains("beta2: 0.999") &&
                          Contains("conv2d_1"));
}

TEST_CASE("a gpu device without a usable GPU is a clear runtime error, auto falls back to the CPU", "[cli]") {
  std::string dir = test::temp_dir("dev");
  std::string cfg =
      test::write_file(dir, "tiny.yaml",
                       "model:\n  input_shape: [4]\n  layers: [{type: dense, units: 2}]\n"
                       "data: {train: {format: random, samples: 20}, num_classes: 2, batch_size: 10}\n"
                       "train: {epochs: 1}\n");
  auto auto_run = test::run_trainer("fit " + cfg + " --device auto --no-out");
  REQUIRE(auto_run.exit_code == 0);
  REQUIRE_THAT(auto_run.out, Contains("epoch 1/1"));
  auto devices = test::run_trainer("devices");
  REQUIRE(devices.exit_code == 0);
  REQUIRE_THAT(devices.out, Contains("cpu:") && Contains("oneDNN"));
  if (devices.out.find("gpu: none usable") != std::string::npos) {
    auto gpu = test::run_trainer("fit " + cfg + " --device gpu:0 --no-out");
    REQUIRE(gpu.exit_code == 5);
    REQUIRE_THAT(gpu.err, Contains("no usable GPU"));
    REQUIRE_THAT(auto_run.err, Contains("running on the CPU"));
  }
}

TEST_CASE("bench times training steps of a config on synthetic batches without its data files",
          "[cli][bench]") {
  const std::string cfg =
      std::string(TRAINER_SOURCE_DIR) + "/configs/reuters_conv1d.yaml";  // its data is absent here
  auto r = test::run_trainer("bench " + cfg + " --steps 3 --warmup 1 --batch-size 4 --json");
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.out,
               Contains("\"steps_per_s\"") && Contains("\"batch\":4") && Contains("\"params\":332856"));
  auto text = test::run_trainer("bench " + cfg + " --steps 2 --warmup 0 --batch-size 2");
  REQUIRE(text.exit_code == 0);
  REQUIRE_THAT(text.out, Contains("ms/step") && Contains("first step after"));
}
