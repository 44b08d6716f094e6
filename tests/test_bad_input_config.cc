// Hostile configs and --set overrides (issue 10): each is refused with a config or usage error that
// names where the problem is, before anything is allocated; none crashes, hangs or exhausts memory.
#include <catch2/catch.hpp>

#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/model/model.h"

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

}  // namespace

TEST_CASE("sizes are multiplied with overflow checks and bounded to 2^31 - 1 elements per tensor", "[config][shapes]") {
  REQUIRE(Shape{1, 28, 28}.fits());
  REQUIRE(Shape{46340, 46340}.fits());
  REQUIRE_FALSE(Shape{46341, 46341}.fits());
  REQUIRE_FALSE(Shape{769546, 494770, 48448661}.fits());            // the product overflows int64
  REQUIRE(Shape{769546, 494770, 48448661}.numel() == INT64_MAX);    // saturates instead of wrapping
  REQUIRE_FALSE(Shape{2147483648, 2147483648, 2147483648}.fits());
  REQUIRE(Shape{1, 28, 28}.fits(kMaxTensorElements, 200));
  REQUIRE_FALSE(Shape{64, 1024, 1024}.fits(kMaxTensorElements, 64));  // per sample fine, per batch not
  REQUIRE(Shape{2, 3}.numel_str(1000) == "6,000");
  REQUIRE(Shape{769546, 494770, 48448661}.numel_str() == "about 1.84e+19");
}

TEST_CASE("an input shape whose element count overflows is a config error naming the key and the shape", "[config][shapes]") {
  REQUIRE_THROWS_WITH(parse(replace(kGood, "[1, 8, 8]", "[769546, 494770, 48448661]")),
                      Contains("test.yaml:2:") && Contains("model.input_shape") &&
                          Contains("(769546, 494770, 48448661) has about 1.84e+19 elements") &&
                          Contains("at most 2,147,483,647"));
  REQUIRE_THROWS_AS(parse(replace(kGood, "[1, 8, 8]", "[2147483648, 2147483648, 2147483648]")), ConfigError);
  // The model checks its input itself too (it is built from shapes that did not come from a config).
  Config c = parse(replace(kGood, "    - {type: conv2d, filters: 2, kernel_size: 3}\n    - {type: flatten}\n",
                           "    - {type: global_avg_pool}\n    - {type: flatten}\n"));
  c.input_shape = Shape{769546, 494770, 48448661};
  REQUIRE_THROWS_WITH(build(c), Contains("model.layers.0 (global_avg_pool") && Contains("input (None, 769546, 494770, 48448661)"));
}

TEST_CASE("a layer output or parameter larger than one tensor may hold names the layer and the shape", "[config][shapes]") {
  Config wide = parse(replace(replace(kGood, "[1, 8, 8]", "[1, 8192, 8192]"), "filters: 2", "filters: 64"));
  REQUIRE_THROWS_WITH(build(wide), Contains("model.layers.0 (conv2d 'conv2d_1')") &&
                                       Contains("output (None, 64, 8190, 8190) has 4,292,870,400 elements"));
  Config dense = parse(replace(replace(kGood, "[1, 8, 8]", "[100000]"), "    - {type: conv2d, filters: 2, kernel_size: 3}\n    - {type: flatten}\n    - {type: dense, units: 3}",
                               "    - {type: dense, units: 100000}\n    - {type: dense, units: 3}"));
  REQUIRE_THROWS_WITH(build(dense), Contains("model.layers.0 (dense 'dense_1')") &&
                                        Contains("parameter 'weight' (100000, 100000) has 10,000,000,000 elements"));
  Config conv = parse(replace(replace(kGood, "[1, 8, 8]", "[65536, 4, 4]"), "filters: 2, kernel_size: 3", "filters: 65536, kernel_size: 1"));
  REQUIRE_THROWS_WITH(build(conv), Contains("model.layers.0 (conv2d") && Contains("parameter 'weight' (65536, 65536, 1, 1)"));
}

TEST_CASE("a batch whose tensors exceed the limit names the layer, its shape and the batch size", "[config][shapes]") {
  Config c = parse(replace(replace(kGood, "[1, 8, 8]", "[1, 1024, 1024]"), "filters: 2", "filters: 64"));
  Model m = build(c);  // each sample fits
  REQUIRE_NOTHROW(m.check_batch_size(8));
  REQUIRE_THROWS_WITH(m.check_batch_size(64), Contains("model.layers.0 (conv2d 'conv2d_1'): the output (None, 64, 1022, 1022)") &&
                                                  Contains("at batch size 64") && Contains("lower data.batch_size"));
  REQUIRE_THROWS_AS(m.check_batch_size(64), ConfigError);
}
