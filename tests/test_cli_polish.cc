// The command line's finish: did-you-mean for verbs and flags, NO_COLOR, --version's build
// details, shortest floats in --print-config, notes for GPU-only settings on the CPU, and a live
// progress line that gives up its bar before its metrics.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>

#include "lib/config/config.h"
#include "lib/keys/yaml_floats.h"
#include "lib/train/progress.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;

namespace {

const char* kDisc = R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 8}, {type: relu}, {type: dense, units: 2}]
loss: cross_entropy
optimizer: {type: adam, lr: 0.1, beta1: 0.9, eps: 1.0e-8}
metrics: [accuracy]
data: {train: {format: disc, samples: 200, seed: 3}, num_classes: 2, batch_size: 50, validation_split: 0.2}
train: {epochs: 1, seed: 5}
)";

}  // namespace

TEST_CASE("an unknown verb or flag is a usage error with the closest one", "[cli][polish]") {
  const std::string cfg = test::write_file(test::temp_dir("did_you_mean"), "disc.yaml", kDisc);
  const struct {
    std::string args, message;
  } cases[] = {
      {"train " + cfg, "error: unknown verb 'train' (did you mean 'fit'?); verbs: fit,"},
      {"evla " + cfg, "error: unknown verb 'evla' (did you mean 'eval'?)"},
      {"chart run", "error: unknown verb 'chart' (did you mean 'plot'?)"},
      {cfg, "(did you mean 'trainer fit " + cfg + "'?)"},
      {"fit " + cfg + " --epoch 1",
       "error: unknown flag '--epoch' (did you mean '--epochs'?); run 'trainer fit --help'"},
      {"fit " + cfg + " --batchsize=4", "unknown flag '--batchsize' (did you mean '--batch-size'?)"},
      {"eval " + cfg + " --weight w", "unknown flag '--weight' (did you mean '--weights'?)"},
      {"--verison", "unknown flag '--verison' (did you mean '--version'?); run 'trainer --help'"},
      {"fit " + cfg + " --zzzzzzzz", "error: unknown flag '--zzzzzzzz'; run 'trainer fit --help'"},
  };
  for (const auto& c : cases) {
    auto r = test::run_trainer(c.args);
    INFO(c.args << "\n" << r.err);
    REQUIRE(r.exit_code == 2);
    REQUIRE_THAT(r.err, Contains(c.message));
  }
}

TEST_CASE("trainer --version names the commit, the compiler and the oneDNN and CUDA of the build",
          "[cli][polish]") {
  auto r = test::run_trainer("--version");
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.out, Contains("trainer 0.") && Contains("(commit ") && Contains("\ncompiler: ") &&
                          Contains("\noneDNN: ") && Contains("(built against ") && Contains("\nCUDA: "));
}

TEST_CASE("NO_COLOR turns the coloured log levels off on a terminal", "[cli][polish]") {
  const std::string dir = test::temp_dir("no_color");
  const std::string cfg = test::write_file(dir, "disc.yaml", kDisc);
  REQUIRE(test::run_trainer("fit " + cfg + " --out " + dir + "/run").exit_code == 0);
  // script(1) gives the trainer a terminal, where spdlog colours the level ("info") by default
  // when TERM names a colour terminal (set here: CI and fresh machines may have no TERM at all).
  const auto on_terminal = [&](const std::string& env) {
    const std::string log = dir + "/tty" + std::to_string(env.size()) + ".log";
    const std::string cmd = "script -qec '" + env + " " + std::string(TRAINER_BINARY) + " eval " + dir +
                            "/run' " + log + " >/dev/null 2>&1";
    REQUIRE(std::system(cmd.c_str()) == 0);
    return test::slurp(log);
  };
  const std::string colored = on_terminal("env -u NO_COLOR TERM=xterm");
  REQUIRE_THAT(colored, Contains("info"));
  REQUIRE_THAT(colored, Contains("\x1b["));
  const std::string plain = on_terminal("env NO_COLOR=1 TERM=xterm");
  REQUIRE_THAT(plain, Contains("info: device:"));
  REQUIRE_THAT(plain, !Contains("\x1b["));
}

TEST_CASE("floats are written back in the shortest form that reads back the same", "[cli][polish][config]") {
  REQUIRE(shortest_float(0.1) == "0.1");
  REQUIRE(shortest_float(0.9) == "0.9");
  REQUIRE(shortest_float(1e-8) == "1.0e-08");  // a float for YAML 1.1 readers (PyYAML) too
  REQUIRE(shortest_float(3.0) == "3.0");
  REQUIRE(shortest_float(0.1 + 0.2) == "0.30000000000000004");  // needs all 17 digits
  REQUIRE(shortest_float(1.0 / 255) == "0.00392156862745098");

  const std::string dir = test::temp_dir("short_floats");
  const std::string cfg = test::write_file(dir, "disc.yaml", kDisc);
  auto r = test::run_trainer("fit " + cfg + " --print-config --set optimizer.beta2=0.999");
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.out, Contains("lr: 0.1\n") && Contains("beta1: 0.9\n") && Contains("beta2: 0.999\n") &&
                          Contains("eps: 1.0e-08\n"));
  REQUIRE_THAT(r.out, !Contains("0000000"));
  // What is printed is a config that resolves to the same values, and prints the same again.
  const std::string printed = test::write_file(dir, "printed.yaml", r.out);
  Config a = load_config(cfg, {"optimizer.beta2=0.999"}), b = load_config(printed, {});
  REQUIRE(a.optimizer.lr == b.optimizer.lr);
  REQUIRE(a.optimizer.hyper.values() == b.optimizer.hyper.values());  // beta1, beta2, eps, weight_decay
  REQUIRE(test::run_trainer("fit " + printed + " --print-config").out == r.out);
  // The run directory's config.yaml is written the same way.
  REQUIRE(test::run_trainer("fit " + cfg + " --out " + dir + "/run").exit_code == 0);
  REQUIRE_THAT(test::slurp(dir + "/run/config.yaml"), Contains("lr: 0.1\n") && !Contains("0000000"));
}

TEST_CASE("the flags --math tf32, --mem-growth and --deterministic on the CPU each get a one-line note",
          "[cli][polish]") {
  const std::string cfg = test::write_file(test::temp_dir("cpu_notes"), "disc.yaml", kDisc);
  auto plain = test::run_trainer("fit " + cfg + " --no-out --device cpu");
  REQUIRE(plain.exit_code == 0);
  REQUIRE_THAT(plain.err, !Contains("does nothing on the CPU"));
  auto r =
      test::run_trainer("fit " + cfg + " --no-out --device cpu --math tf32 --mem-growth --deterministic");
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.err, Contains("info: --math tf32 (math: tf32) does nothing on the CPU") &&
                          Contains("info: --mem-growth (device.memory_growth) does nothing on the CPU") &&
                          Contains("info: --deterministic (train.deterministic) does nothing on the CPU"));
}

TEST_CASE("the live progress line shrinks its bar before it drops a metric", "[progress][polish]") {
  const std::vector<std::pair<std::string, double>> four{
      {"loss", 0.4123}, {"accuracy", 0.8512}, {"precision", 0.8401}, {"recall", 0.8302}};
  const auto line = [&](int columns) { return live_line(3, 10, 120, 300, 3.2, 0.0267, four, columns); };
  SECTION("wide: the whole line with a 20-column bar") {
    REQUIRE(
        line(200) ==
        "epoch 3/10    120/300 [========>...........] 3.2s 26.7ms/step ETA 4.8s loss=0.4123 accuracy=0.8512 "
        "precision=0.8401 recall=0.8302");
  }
  SECTION("120 columns: a shorter bar, every metric") {
    const std::string l = line(120);
    REQUIRE(l.size() <= 119);
    REQUIRE_THAT(l, Contains(" [") && Contains("ms/step") && Contains("recall=0.8302"));
    REQUIRE(l.find("[====") != std::string::npos);
    REQUIRE(l.find("....................") == std::string::npos);
  }
  SECTION("80 columns: no bar, no timing, every metric") {
    REQUIRE(line(80) == "epoch 3/10 120/300 loss=0.4123 accuracy=0.8512 precision=0.8401 recall=0.8302");
  }
  SECTION("narrower: the last metrics go first, the loss last") {
    REQUIRE(line(60) == "epoch 3/10 120/300 loss=0.4123 accuracy=0.8512");
    REQUIRE(line(32) == "epoch 3/10 120/300 loss=0.4123");
    REQUIRE(line(10).size() == 9);
  }
  for (int columns : {2, 20, 40, 79, 80, 81, 100, 119, 120, 121, 160})
    REQUIRE(line(columns).size() < size_t(columns));
}

TEST_CASE("the bash completion offers verbs, each verb's flags and the values of --device", "[cli][polish]") {
  const auto complete = [](const std::string& words, int cword) {
    const std::string dir = test::temp_dir("completion");
    const std::string cmd = "bash -c 'source " + std::string(TRAINER_SOURCE_DIR) +
                            "/scripts/trainer-completion.bash; COMP_WORDS=(" + TRAINER_BINARY + " " + words +
                            "); COMP_CWORD=" + std::to_string(cword) +
                            "; _trainer; echo \"${COMPREPLY[*]}\"' > " + dir + "/out 2>&1";
    REQUIRE(std::system(cmd.c_str()) == 0);
    return test::slurp(dir + "/out");
  };
  REQUIRE(complete("ev", 1) == "eval\n");
  REQUIRE(complete("pl", 1) == "plot\n");  // verbs come from trainer --help
  REQUIRE(complete("fit x.yaml --ep", 3) == "--epochs\n");
  REQUIRE_THAT(complete("eval x.yaml --", 3),
               Contains("--weights") && Contains("--split") && !Contains("--epochs"));
  REQUIRE(complete("fit x.yaml --math ", 4) == "fp32 tf32\n");
  REQUIRE(complete("export run --format ", 4) == "onnx\n");
  REQUIRE_THAT(complete("fit x.yaml --device g", 4), Contains("gpu gpu:0"));
}

TEST_CASE("the build makes a man page with every verb's flags where help2man is installed", "[cli][polish]") {
  if (std::system("command -v help2man >/dev/null 2>&1") != 0) {
    WARN("help2man is not installed: the build makes no man page (scripts/setup.sh installs it)");
    return;
  }
  const std::string page =
      test::slurp(std::filesystem::path(TRAINER_BINARY).parent_path().string() + "/trainer.1");
  REQUIRE_THAT(page, Contains(".TH TRAINER \"1\"") && Contains(".SS trainer fit") && Contains("--resume") &&
                         Contains(".SS trainer eval") && Contains(".SS trainer plot") &&
                         Contains(".SS trainer export") && Contains("EXIT STATUS") && Contains("NO_COLOR"));
}
