// A run killed (SIGKILL, power loss) while it wrote its first checkpoint leaves an incomplete one:
// the weights file without its state file, or a temporary *.tmp-PID file. That is no checkpoint:
// --resume has nothing to continue from, so a fresh fit --out must be able to use the directory.
// Found by scripts/kill_loop.sh (issue 10): the directory could be neither resumed nor restarted.
#include <catch2/catch.hpp>
#include <filesystem>

#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

const char* kTiny = R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 8}, {type: relu}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: adam, lr: 0.01}
data: {train: {format: disc, samples: 200, seed: 3}, num_classes: 2, batch_size: 50}
train: {epochs: 2, seed: 7}
)";

}  // namespace

TEST_CASE("a run directory holding only an incomplete first checkpoint is started afresh by fit --out",
          "[run_dir][crash]") {
  const std::string dir = test::temp_dir("killed_first_ckpt");
  const std::string cfg = test::write_file(dir, "tiny.yaml", kTiny);
  const std::string run = dir + "/run";
  // What a kill between the two files of epoch 1 leaves: weights renamed into place, the state
  // file still a temporary of the dead writer.
  auto full = test::run_trainer("fit " + cfg + " --epochs 1 --out " + dir + "/donor");
  REQUIRE(full.exit_code == 0);
  fs::create_directories(run + "/checkpoints");
  test::write_file(run, "run.lock", "pid 999999\nhost gone\n");  // the killed run's lock file
  fs::copy_file(dir + "/donor/checkpoints/epoch-0001.safetensors",
                run + "/checkpoints/epoch-0001.safetensors");
  test::write_file(run + "/checkpoints", "epoch-0001.state.safetensors.tmp-999999", "partial");

  auto resume = test::run_trainer("fit " + cfg + " --resume " + run);
  REQUIRE(resume.exit_code == 2);
  REQUIRE_THAT(resume.err, Contains("no checkpoint"));

  auto fresh = test::run_trainer("fit " + cfg + " --out " + run);
  INFO(fresh.err);
  REQUIRE(fresh.exit_code == 0);
  REQUIRE(fs::exists(run + "/checkpoints/epoch-0002.state.safetensors"));

  // A complete checkpoint is a run: a fresh fit --out still refuses it.
  auto again = test::run_trainer("fit " + cfg + " --out " + run);
  REQUIRE(again.exit_code == 2);
  REQUIRE_THAT(again.err, Contains("--resume " + run));
}
