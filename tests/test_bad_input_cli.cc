// Hostile configs and arguments through the trainer binary (issue 10): the exit code and the one
// line on stderr that each gets. These are the config and flag rows of the bad-input table of
// docs/reliability.md.
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <vector>

#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;
using Catch::EndsWith;
using Catch::StartsWith;

namespace {

const char* kTiny =
    "model:\n  input_shape: [4]\n  layers: [{type: dense, units: 2}]\n"
    "optimizer: {type: sgd, lr: 0.1}\n"
    "data: {train: {format: random, samples: 20}, num_classes: 2, batch_size: 10}\n"
    "train: {epochs: 1}\n";

size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

// Exactly one line on stderr, "error: ..."; nothing on stdout.
void require_one_error_line(const test::CommandResult& r) {
  REQUIRE_THAT(r.err, StartsWith("error: "));
  REQUIRE(lines(r.err) == 1);
  REQUIRE(r.out.empty());
}

}  // namespace

TEST_CASE("a size product that overflows is a config error in every verb, never a crash", "[cli][shapes]") {
  const std::string dir = test::temp_dir("overflow");
  const std::string pool = test::write_file(
      dir, "pool.yaml",
      "model:\n  input_shape: [769546, 494770, 48448661]\n  layers: [{type: global_avg_pool}]\n"
      "data: {train: {format: random, samples: 20}, num_classes: 769546}\n");
  for (const char* verb : {"fit", "bench", "summary"}) {
    auto r = test::run_trainer(std::string(verb) + " " + pool + (verb[0] == 'f' ? " --no-out" : ""));
    REQUIRE(r.exit_code == 3);
    require_one_error_line(r);
    REQUIRE_THAT(
        r.err,
        Contains(
            "pool.yaml:2:16: model.input_shape: (769546, 494770, 48448661) has about 1.84e+19 elements"));
  }
  auto neg = test::run_trainer("summary " + pool +
                               " --set 'model.input_shape=[2147483648, 2147483648, 2147483648]'");
  REQUIRE(neg.exit_code == 3);
  REQUIRE_THAT(
      neg.err,
      Contains("--set: model.input_shape: (2147483648, 2147483648, 2147483648) has about 9.9e+27 elements"));
  // Each sample fits; a batch of 64 does not.
  auto batch = test::run_trainer(
      "summary " + pool +
      " --set 'model.input_shape=[1, 1024, 1024]' --set data.num_classes=64"
      " --set 'model.layers=[{type: conv2d, filters: 64, kernel_size: 3}, {type: global_avg_pool}]'"
      " --set data.batch_size=64");
  REQUIRE(batch.exit_code == 3);
  REQUIRE_THAT(
      batch.err,
      Contains("model.layers.0 (conv2d 'conv2d_1'): the output (None, 64, 1022, 1022) at batch size 64"));
}

TEST_CASE("a duplicate key is a config error naming both lines", "[cli]") {
  const std::string dir = test::temp_dir("dupkey");
  const std::string cfg =
      test::write_file(dir, "dup.yaml", std::string(kTiny) + "optimizer:\n  lr: 0.001\n  lr: 5.0\n");
  auto r = test::run_trainer("fit " + cfg + " --no-out");
  REQUIRE(r.exit_code == 3);
  require_one_error_line(r);
  REQUIRE_THAT(r.err, Contains("dup.yaml:7:1: duplicate key 'optimizer', also at " + cfg + ":4:1"));
}

TEST_CASE("a config that is not a regular file, too big, too deep or empty gets one line naming the file",
          "[cli]") {
  const std::string dir = test::temp_dir("cfgkinds");
  auto zero = test::run_trainer("fit /dev/zero");
  REQUIRE(zero.exit_code == 2);
  require_one_error_line(zero);
  REQUIRE_THAT(zero.err, Contains("/dev/zero: the config is a character device, not a regular file"));

  const std::string fifo = dir + "/fifo.yaml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  auto f = test::run_trainer("summary " + fifo);  // must not wait for a writer
  REQUIRE(f.exit_code == 2);
  REQUIRE_THAT(f.err, Contains("fifo.yaml: the config is a FIFO (named pipe)"));

  std::string many = std::string(kTiny) + "metrics: [";
  for (int i = 0; i < 200000; ++i) many += "accuracy, ";
  auto m = test::run_trainer("fit " + test::write_file(dir, "many.yaml", many + "f1]\n"));
  REQUIRE(m.exit_code == 3);
  REQUIRE_THAT(m.err, Contains("many.yaml:7:") && Contains("more than 100,000 YAML nodes"));

  auto deep = test::run_trainer(
      "fit " +
      test::write_file(dir, "deep.yaml", "a: " + std::string(10000, '[') + std::string(10000, ']') + "\n"));
  REQUIRE(deep.exit_code == 3);
  require_one_error_line(deep);
  REQUIRE_THAT(deep.err, Contains("deep.yaml:1:") && Contains("nested more than 64 levels deep"));

  auto empty = test::run_trainer("fit " + test::write_file(dir, "empty.yaml", "# nothing yet\n") +
                                 " --set optimizer.lr=0.1");
  REQUIRE(empty.exit_code == 3);
  require_one_error_line(empty);
  REQUIRE_THAT(empty.err, Contains("empty.yaml: the config file is empty"));
}

TEST_CASE("control and non-UTF-8 bytes from a config or an argument are escaped in messages", "[cli]") {
  const std::string dir = test::temp_dir("bytes");
  static const char kNul[] = "model:\0\x1b[2J\n";  // 12 bytes and the terminator
  auto nul =
      test::run_trainer("fit " + test::write_file(dir, "nul.yaml", std::string(kNul, sizeof kNul - 1)));
  REQUIRE(nul.exit_code == 3);
  require_one_error_line(nul);
  REQUIRE_THAT(nul.err, Contains("nul.yaml:1:7: the config is not UTF-8 text (byte \\x00)"));
  // An unknown key holding an escape sequence and an invalid byte (the file itself is valid UTF-8 up to
  // there).
  auto key = test::run_trainer(
      "fit " + test::write_file(dir, "key.yaml", std::string(kTiny) + "\"\\e[31m\\xff\": 1\n"));
  REQUIRE(key.exit_code == 3);
  require_one_error_line(key);
  REQUIRE_THAT(key.err, Contains("unknown key '\\x1b[31m"));
  REQUIRE(key.err.find('\x1b') == std::string::npos);
  // An argument: the shell passes the bytes ESC and 0xff.
  auto arg = test::run_trainer("fit \"$(printf '\\033[31m\\377')\"");
  REQUIRE(arg.exit_code == 2);
  require_one_error_line(arg);
  REQUIRE_THAT(arg.err, Contains("\\x1b[31m\\xff"));
  REQUIRE(arg.err.find('\x1b') == std::string::npos);
  REQUIRE(arg.err.find('\xff') == std::string::npos);
}

TEST_CASE("usage errors are one line pointing at the verb's --help, exit 2", "[cli]") {
  const std::string dir = test::temp_dir("usage");
  const std::string cfg = test::write_file(dir, "tiny.yaml", kTiny);
  for (const std::string& args : std::vector<std::string>{
           "fit " + cfg + " --epochs zero", "fit " + cfg + " --frobnicate", "fit",
           "fit " + cfg + " --set optimizer.lr.=1", "fit " + cfg + " --out ''", "fit " + cfg + " --resume ''",
           "fit " + cfg + " --device ''", "fit " + cfg + " --device tpu", "summary " + cfg + " --set ''"}) {
    CAPTURE(args);
    auto r = test::run_trainer(args);
    REQUIRE(r.exit_code == 2);
    require_one_error_line(r);
    REQUIRE_THAT(r.err,
                 EndsWith("; run 'trainer " + args.substr(0, args.find(' ')) + " --help' for usage\n"));
  }
  auto verb = test::run_trainer("frobnicate");
  REQUIRE(verb.exit_code == 2);
  require_one_error_line(verb);
  REQUIRE_THAT(verb.err,
               Contains("unknown verb 'frobnicate'; verbs: fit, summary, eval, predict, generate, export, "
                        "devices, bench, plot, schema, help") &&
                   EndsWith("; run 'trainer --help' for usage\n"));
  auto none = test::run_trainer("");
  REQUIRE(none.exit_code == 2);
  REQUIRE_THAT(none.err, Contains("error: a verb is required; verbs: fit,"));
  REQUIRE_THAT(test::run_trainer("fit " + cfg + " --out ''").err, Contains("--out: must not be empty"));
  REQUIRE_THAT(test::run_trainer("fit " + cfg + " --set optimizer.lr.=1").err,
               Contains("--set optimizer.lr.=1: empty key segment in 'optimizer.lr.'"));
}

TEST_CASE("config errors from --set and the data section exit 3 naming the key and what is allowed",
          "[cli]") {
  const std::string dir = test::temp_dir("setcfg");
  const std::string cfg = test::write_file(dir, "tiny.yaml", kTiny);
  auto idx = test::run_trainer("fit " + cfg + " --set model.layers.99999999999999999999999.units=3");
  REQUIRE(idx.exit_code == 3);
  require_one_error_line(idx);
  REQUIRE_THAT(idx.err, Contains("'model.layers' is a list of 1 items; index 99999999999999999999999 is out "
                                 "of range (allowed: 0 to 0)"));
  auto scale = test::run_trainer("fit " + cfg + " --no-out --set data.normalize.scale=0");
  REQUIRE(scale.exit_code == 3);
  require_one_error_line(scale);
  REQUIRE_THAT(scale.err,
               Contains("data.normalize.scale: value 0 is out of range; allowed: a non-zero number"));
}

TEST_CASE("an existing file given as --out is a usage error before the run starts", "[cli]") {
  const std::string dir = test::temp_dir("outfile");
  const std::string cfg = test::write_file(dir, "tiny.yaml", kTiny);
  const std::string file = test::write_file(dir, "taken", "not a run directory\n");
  auto r = test::run_trainer("fit " + cfg + " --out " + file);
  REQUIRE(r.exit_code == 2);
  require_one_error_line(r);
  REQUIRE_THAT(r.err, Contains("--out: '" + file + "' exists and is not a directory"));
  REQUIRE(test::slurp(file) == "not a run directory\n");
}

TEST_CASE("summary validates the config exactly as fit does, without reading data", "[cli]") {
  const std::string dir = test::temp_dir("summaryval");
  const std::string cfg = test::write_file(dir, "tiny.yaml", kTiny);
  REQUIRE(test::run_trainer("summary " + cfg).exit_code == 0);
  for (const char* set :
       {"data.train.format=idxx", "data.num_classes=3", "data.validation={format: random, smaples: 3}",
        "data={train: {format: idxx}, validation: {format: nppy}, num_classes: 2}"}) {
    CAPTURE(set);
    auto fit = test::run_trainer("fit " + cfg + " --no-out --set '" + set + "'");
    auto summary = test::run_trainer("summary " + cfg + " --set '" + set + "'");
    REQUIRE(fit.exit_code == 3);
    REQUIRE(summary.exit_code == 3);
    REQUIRE(summary.err == fit.err);
  }
}
