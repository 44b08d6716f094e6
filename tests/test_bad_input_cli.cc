// Hostile configs and arguments through the trainer binary (issue 10): the exit code and the one
// line on stderr that each gets. These are the config and flag rows of the README's bad-input table.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <vector>

#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;
using Catch::EndsWith;
using Catch::StartsWith;

namespace {

const char* kTiny = "model:\n  input_shape: [4]\n  layers: [{type: dense, units: 2}]\n"
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
  const std::string pool = test::write_file(dir, "pool.yaml",
                                            "model:\n  input_shape: [769546, 494770, 48448661]\n  layers: [{type: global_avg_pool}]\n"
                                            "data: {train: {format: random, samples: 20}, num_classes: 769546}\n");
  for (const char* verb : {"fit", "bench", "summary"}) {
    auto r = test::run_trainer(std::string(verb) + " " + pool + (verb[0] == 'f' ? " --no-out" : ""));
    REQUIRE(r.exit_code == 3);
    require_one_error_line(r);
    REQUIRE_THAT(r.err, Contains("pool.yaml:2:16: model.input_shape: (769546, 494770, 48448661) has about 1.84e+19 elements"));
  }
  auto neg = test::run_trainer("summary " + pool + " --set 'model.input_shape=[2147483648, 2147483648, 2147483648]'");
  REQUIRE(neg.exit_code == 3);
  REQUIRE_THAT(neg.err, Contains("--set: model.input_shape: (2147483648, 2147483648, 2147483648) has about 9.9e+27 elements"));
  // Each sample fits; a batch of 64 does not.
  auto batch = test::run_trainer("summary " + pool + " --set 'model.input_shape=[1, 1024, 1024]' --set data.num_classes=64"
                                 " --set 'model.layers=[{type: conv2d, filters: 64, kernel_size: 3}, {type: global_avg_pool}]'"
                                 " --set data.batch_size=64");
  REQUIRE(batch.exit_code == 3);
  REQUIRE_THAT(batch.err, Contains("model.layers.0 (conv2d 'conv2d_1'): the output (None, 64, 1022, 1022) at batch size 64"));
}

TEST_CASE("summary validates the config exactly as fit does, without reading data", "[cli]") {
  const std::string dir = test::temp_dir("summaryval");
  const std::string cfg = test::write_file(dir, "tiny.yaml", kTiny);
  REQUIRE(test::run_trainer("summary " + cfg).exit_code == 0);
  for (const char* set : {"data.train.format=idxx", "data.num_classes=3", "data.validation={format: random, smaples: 3}"}) {
    CAPTURE(set);
    auto fit = test::run_trainer("fit " + cfg + " --no-out --set '" + set + "'");
    auto summary = test::run_trainer("summary " + cfg + " --set '" + set + "'");
    REQUIRE(fit.exit_code == 3);
    REQUIRE(summary.exit_code == 3);
    REQUIRE(summary.err == fit.err);
  }
}
