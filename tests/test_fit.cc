// End to end: fit on real Fashion-MNIST (a 2,000-sample subset) clearly beats chance; the same
// seed gives identical losses; the run directory holds the config and the metrics.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lib/config/config.h"
#include "lib/train/fit.h"
#include "tests/test_util.h"

using namespace trainer;

static const std::string kCfg = std::string(TRAINER_SOURCE_DIR) + "/configs/fashion_mnist_cnn.yaml";
static const char* kImages = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz";

TEST_CASE("fit on a 2,000-sample Fashion-MNIST subset beats chance by far", "[fit][e2e]") {
  if (!std::filesystem::exists(kImages))
    FAIL("Fashion-MNIST is missing: install dataset-fashion-mnist (scripts/setup.sh does)");
  Config cfg = load_config(
      kCfg, {"train.epochs=3", "data.train.limit=2000", "data.validation.limit=1000", "data.batch_size=50"});
  FitOptions fo;
  std::string dir = test::temp_dir("fit");
  fo.out_dir = dir + "/run";
  std::ostringstream out;
  FitResult r = fit(cfg, fo, out);
  INFO(out.str());
  REQUIRE(r.epochs_run == 3);
  REQUIRE(r.final_val_accuracy > 0.55);  // chance is 0.10
  REQUIRE(out.str().find("epoch 3/3 loss=") != std::string::npos);
  REQUIRE(std::filesystem::exists(fo.out_dir + "/config.yaml"));
  std::ifstream csv(fo.out_dir + "/metrics.csv");
  std::string header;
  std::getline(csv, header);
  REQUIRE(header == "epoch,loss,accuracy,val_loss,val_accuracy,lr,seconds");
}

TEST_CASE("the same seed gives identical losses on the CPU and another seed does not", "[fit][determinism]") {
  const char* yaml = R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 16}, {type: relu}, {type: dropout, rate: 0.2}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9}
data: {train: {format: disc, samples: 300}, num_classes: 2, batch_size: 32, validation_split: 0.2}
train: {epochs: 3, seed: 5}
)";
  auto run = [&](std::vector<std::string> sets) {
    Config cfg = parse_config(yaml, "det.yaml", sets);
    std::ostringstream out;
    return fit(cfg, FitOptions{}, out);
  };
  FitResult a = run({}), b = run({}), c = run({"train.seed=6"});
  REQUIRE(a.final_train_loss == b.final_train_loss);
  REQUIRE(a.final_val_loss == b.final_val_loss);
  REQUIRE(a.final_train_loss != c.final_train_loss);
}
