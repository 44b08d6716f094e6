// Hostile configs and --set overrides (issue 10): each is refused with a config or usage error that
// names where the problem is, before anything is allocated; none crashes, hangs or exhausts memory.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/core/printable.h"
#include "lib/keys/yaml_loader.h"
#include "lib/model/model.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;

namespace {

const char* kGood = R"(model:
  input_shape: [1, 8, 8]
  layers:
    - {type: conv2d, filters: 2, kernel_size: 3}
    - {type: flatten}
    - {type: dense, units: 3}
optimizer: {type: sgd, lr: 0.1}
data:
  train: {format: random, samples: 50}
  num_classes: 3
  batch_size: 10
train: {epochs: 2}
)";

Config parse(const std::string& text, std::vector<std::string> sets = {}) {
  return parse_config(text, "test.yaml", sets);
}

std::string replace(std::string s, const std::string& from, const std::string& to) {
  s.replace(s.find(from), from.size(), to);
  return s;
}

Model build(const Config& c) { return Model(c.input_shape, c.layers, c.init, c.file); }

std::string repeat(const std::string& s, size_t n) {
  std::string out;
  out.reserve(s.size() * n);
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

TEST_CASE("sizes are multiplied with overflow checks and bounded to 2^31 - 1 elements per tensor",
          "[config][shapes]") {
  REQUIRE(Shape{1, 28, 28}.fits());
  REQUIRE(Shape{46340, 46340}.fits());
  REQUIRE_FALSE(Shape{46341, 46341}.fits());
  REQUIRE_FALSE(Shape{769546, 494770, 48448661}.fits());          // the product overflows int64
  REQUIRE(Shape{769546, 494770, 48448661}.numel() == INT64_MAX);  // saturates instead of wrapping
  REQUIRE_FALSE(Shape{2147483648, 2147483648, 2147483648}.fits());
  REQUIRE(Shape{1, 28, 28}.fits(kMaxTensorElements, 200));
  REQUIRE_FALSE(Shape{64, 1024, 1024}.fits(kMaxTensorElements, 64));  // per sample fine, per batch not
  REQUIRE(Shape{2, 3}.numel_str(1000) == "6,000");
  REQUIRE(Shape{769546, 494770, 48448661}.numel_str() == "about 1.84e+19");
}

TEST_CASE("an input shape whose element count overflows is a config error naming the key and the shape",
          "[config][shapes]") {
  REQUIRE_THROWS_WITH(parse(replace(kGood, "[1, 8, 8]", "[769546, 494770, 48448661]")),
                      Contains("test.yaml:2:") && Contains("model.input_shape") &&
                          Contains("(769546, 494770, 48448661) has about 1.84e+19 elements") &&
                          Contains("at most 2,147,483,647"));
  REQUIRE_THROWS_AS(parse(replace(kGood, "[1, 8, 8]", "[2147483648, 2147483648, 2147483648]")), ConfigError);
  // The model checks its input itself too (it is built from shapes that did not come from a config).
  Config c = parse(replace(kGood, "    - {type: conv2d, filters: 2, kernel_size: 3}\n    - {type: flatten}\n",
                           "    - {type: global_avg_pool}\n    - {type: flatten}\n"));
  c.input_shape = Shape{769546, 494770, 48448661};
  REQUIRE_THROWS_WITH(build(c), Contains("model.layers.0 (global_avg_pool") &&
                                    Contains("input (None, 769546, 494770, 48448661)"));
}

TEST_CASE("a layer output or parameter larger than one tensor may hold names the layer and the shape",
          "[config][shapes]") {
  Config wide = parse(replace(replace(kGood, "[1, 8, 8]", "[1, 8192, 8192]"), "filters: 2", "filters: 64"));
  REQUIRE_THROWS_WITH(build(wide), Contains("model.layers.0 (conv2d 'conv2d_1')") &&
                                       Contains("output (None, 64, 8190, 8190) has 4,292,870,400 elements"));
  Config dense = parse(replace(replace(kGood, "[1, 8, 8]", "[100000]"),
                               "    - {type: conv2d, filters: 2, kernel_size: 3}\n    - {type: flatten}\n    "
                               "- {type: dense, units: 3}",
                               "    - {type: dense, units: 100000}\n    - {type: dense, units: 3}"));
  REQUIRE_THROWS_WITH(build(dense),
                      Contains("model.layers.0 (dense 'dense_1')") &&
                          Contains("parameter 'weight' (100000, 100000) has 10,000,000,000 elements"));
  Config conv = parse(replace(replace(kGood, "[1, 8, 8]", "[65536, 4, 4]"), "filters: 2, kernel_size: 3",
                              "filters: 65536, kernel_size: 1"));
  REQUIRE_THROWS_WITH(
      build(conv), Contains("model.layers.0 (conv2d") && Contains("parameter 'weight' (65536, 65536, 1, 1)"));
}

TEST_CASE("a batch whose tensors exceed the limit names the layer, its shape and the batch size",
          "[config][shapes]") {
  Config c = parse(replace(replace(kGood, "[1, 8, 8]", "[1, 1024, 1024]"), "filters: 2", "filters: 64"));
  Model m = build(c);  // each sample fits
  REQUIRE_NOTHROW(m.check_batch_size(8));
  REQUIRE_THROWS_WITH(m.check_batch_size(64),
                      Contains("model.layers.0 (conv2d 'conv2d_1'): the output (None, 64, 1022, 1022)") &&
                          Contains("at batch size 64") && Contains("lower data.batch_size"));
  REQUIRE_THROWS_AS(m.check_batch_size(64), ConfigError);
}

TEST_CASE("a duplicate key in one mapping is an error naming both lines", "[config]") {
  REQUIRE_THROWS_WITH(parse(replace(kGood, "lr: 0.1}", "lr: 0.1, lr: 5.0}")),
                      Contains("test.yaml:7:33: duplicate key 'optimizer.lr', also at test.yaml:7:24"));
  REQUIRE_THROWS_WITH(parse(std::string(kGood) + "optimizer:\n  type: adam\n"),
                      Contains("test.yaml:13:1: duplicate key 'optimizer', also at test.yaml:7:1"));
  // Inside a list item, at any depth.
  REQUIRE_THROWS_WITH(parse(replace(kGood, "{type: dense, units: 3}", "{type: dense, units: 3, units: 4}")),
                      Contains("duplicate key 'model.layers.2.units'"));
  REQUIRE_THROWS_AS(parse(std::string(kGood) + "train: {epochs: 3}\n"), ConfigError);
  // The same key in different mappings is fine.
  REQUIRE_NOTHROW(parse(replace(kGood, "train: {epochs: 2}",
                                "train: {epochs: 2}\nschedule: {type: step, gamma: 0.5}\n"
                                "early_stopping: {patience: 3}\n")));
  // In a --set value too.
  REQUIRE_THROWS_WITH(parse(kGood, {"optimizer={type: sgd, lr: 1, lr: 2}"}), Contains("duplicate key 'lr'"));
}

TEST_CASE("node count, nesting depth, aliases and documents of a config are bounded", "[config]") {
  const std::string many =
      replace(kGood, "train: {epochs: 2}", "metrics: [" + repeat("accuracy, ", 100001) + "accuracy]");
  REQUIRE_THROWS_WITH(parse(many), Contains("test.yaml:12:") && Contains("more than 100,000 YAML nodes"));
  const std::string deep =
      replace(kGood, "train: {epochs: 2}", "x: " + repeat("[", 10000) + repeat("]", 10000));
  REQUIRE_THROWS_WITH(parse(deep), Contains("test.yaml:12:") && Contains("nested more than 64 levels deep"));
  const std::string block_deep = "x:\n" + [] {
    std::string s;
    for (int i = 0; i < 100; ++i) s += std::string(size_t(2 * i + 2), ' ') + "- \n";
    return s;
  }();
  REQUIRE_THROWS_WITH(parse(block_deep), Contains("nested more than 64 levels deep"));
  // Each level multiplies by 10 through aliases: a million nodes from a few lines.
  std::string bomb = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 6; ++i)
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" +
            repeat("*a" + std::to_string(i - 1) + ", ", 9) + "*a" + std::to_string(i - 1) + "]\n";
  REQUIRE_THROWS_WITH(parse(std::string(kGood) + bomb),
                      Contains("through its aliases") && Contains("100,000 nodes"));
  REQUIRE_THROWS_WITH(parse(std::string(kGood) + "---\nmodel: {}\n"),
                      Contains("more than one YAML document"));
  REQUIRE_THROWS_WITH(parse(std::string(kGood) + "#" + std::string(kMaxConfigBytes, 'x')),
                      Contains("test.yaml: the config is") && Contains("at most 16,777,216 (16 MiB)"));
  // --set values are YAML under the same bounds.
  REQUIRE_THROWS_WITH(parse(kGood, {"model.init=" + repeat("[", 5000)}),
                      Contains("--set model.init:1:") && Contains("nested more than 64"));
}

TEST_CASE("an empty config says the file is empty", "[config]") {
  for (const char* text : {"", "\n\n", "# nothing but a comment\n", "---\n"})
    REQUIRE_THROWS_WITH(parse(text, {"optimizer.lr=0.5"}),
                        Contains("test.yaml: the config file is empty") && !Contains("--set"));
  REQUIRE_THROWS_WITH(parse("just a value\n"),
                      Contains("test.yaml:1:1: the config must be a mapping of sections"));
  REQUIRE_THROWS_WITH(parse("- a\n- b\n"), Contains("got a list"));
}

TEST_CASE("a config that is not UTF-8 text is refused at its first bad byte, escaped", "[config]") {
  std::string nul = kGood;
  nul[nul.find("lr")] = '\0';
  REQUIRE_THROWS_WITH(parse(nul), Contains("test.yaml:7:24: the config is not UTF-8 text (byte \\x00)"));
  REQUIRE_THROWS_WITH(parse(std::string(kGood) + "device: cpu\xff\n"),
                      Contains("test.yaml:13:12") && Contains("(byte \\xff)"));
  REQUIRE_NOTHROW(
      parse(std::string(kGood) + "# caf\xc3\xa9, \xe6\x97\xa5\xe6\x9c\xac\n"));  // UTF-8 comments are fine
}

TEST_CASE("printable() escapes control and invalid UTF-8 bytes and keeps UTF-8 text", "[config][cli]") {
  REQUIRE(printable("plain text: 1,2") == "plain text: 1,2");
  REQUIRE(printable(std::string("a\0b", 3)) == "a\\x00b");
  REQUIRE(printable("\x1b[31mred\n") == "\\x1b[31mred\\x0a");
  REQUIRE(printable("caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80") ==
          "caf\xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80");
  REQUIRE(printable("\xff\xfe") == "\\xff\\xfe");
  REQUIRE(printable("\xc3") == "\\xc3");                    // truncated sequence
  REQUIRE(printable("\xc0\xaf") == "\\xc0\\xaf");           // overlong '/'
  REQUIRE(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a UTF-16 surrogate
  REQUIRE(printable("\xc2\x9b") == "\\xc2\\x9b");           // C1 control (CSI)
  REQUIRE(printable("\x7f") == "\\x7f");
}

TEST_CASE("a --set path with an empty segment is a usage error, an index out of range names the range",
          "[config]") {
  for (const char* bad : {"optimizer.lr.=1", "optimizer..lr=1", ".lr=1", "=1", "optimizer.lr"})
    REQUIRE_THROWS_AS(parse(kGood, {bad}), UsageError);
  REQUIRE_THROWS_WITH(parse(kGood, {"optimizer.lr.=1"}),
                      Contains("--set optimizer.lr.=1: empty key segment in 'optimizer.lr.'"));
  REQUIRE_THROWS_WITH(parse(kGood, {"model.layers.99999999999999999999999.units=3"}),
                      Contains("'model.layers' is a list of 3 items; index 99999999999999999999999 is out of "
                               "range (allowed: 0 to 2)"));
  REQUIRE_THROWS_AS(parse(kGood, {"model.layers.99999999999999999999999.units=3"}), ConfigError);
  REQUIRE_THROWS_WITH(parse(kGood, {"model.layers.3.units=3"}),
                      Contains("index 3 is out of range (allowed: 0 to 2)"));
  REQUIRE_THROWS_WITH(parse(kGood, {"model.layers.-1.units=3"}),
                      Contains("'-1' is not an index in it (allowed: 0 to 2)"));
  REQUIRE(parse(kGood, {"model.layers.0002.units=5"}).layers[2]["units"].as<int>() == 5);
}

TEST_CASE("normalize.scale 0 is a config error naming the key and the allowed range", "[config]") {
  const std::string cfg = replace(kGood, "batch_size: 10", "batch_size: 10\n  normalize: {scale: 0}");
  REQUIRE_THROWS_WITH(parse(cfg), Contains("test.yaml:12:") && Contains("data.normalize.scale") &&
                                      Contains("value 0") && Contains("allowed: a non-zero number"));
  REQUIRE_THROWS_AS(parse(kGood, {"data.normalize.scale=1e-50"}), ConfigError);
  REQUIRE(parse(kGood, {"data.normalize.scale=-0.5"}).data.normalize.scale == -0.5);
}

TEST_CASE("a config path that is not a regular file is refused without reading or blocking", "[config]") {
  const std::string dir = test::temp_dir("cfgfile");
  const std::string fifo = dir + "/fifo.yaml";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  REQUIRE_THROWS_WITH(read_config_file(fifo),
                      Contains(fifo + ": the config is a FIFO (named pipe), not a regular file"));
  REQUIRE_THROWS_AS(read_config_file(fifo), UsageError);
  REQUIRE_THROWS_WITH(read_config_file(dir), Contains("a directory, not a regular file"));
  REQUIRE_THROWS_WITH(read_config_file("/dev/zero"), Contains("/dev/zero: the config is a character device"));
  REQUIRE_THROWS_WITH(read_config_file(dir + "/missing.yaml"),
                      Contains("cannot open the config file: No such file"));
  // A file over the limit is refused from its size, before it is read (this one is sparse).
  const std::string big = test::write_file(dir, "big.yaml", "model: {}\n");
  REQUIRE(::truncate(big.c_str(), off_t(kMaxConfigBytes) + 1) == 0);
  REQUIRE_THROWS_WITH(read_config_file(big),
                      Contains("big.yaml: the config file is 16,777,217 bytes; at most"));
  REQUIRE_THROWS_AS(read_config_file(big), ConfigError);
  REQUIRE(read_config_file(test::write_file(dir, "ok.yaml", kGood)) == kGood);
}
