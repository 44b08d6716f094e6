// Integers in a config read as YAML 1.2 reads them: a leading zero is decimal (YAML 1.1, and
// yaml-cpp, read "032" as octal 26 and refuse "0128"); 0o and 0x are octal and hexadecimal.
#include <catch2/catch.hpp>

#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/model/model.h"

using namespace trainer;
using Catch::Contains;

namespace {

const char* kConfig = R"(model:
  input_shape: [1, 4, 4]
  layers: [{type: flatten}, {type: dense, units: 032}, {type: dense, units: 2}]
data: {train: {format: random}, num_classes: 2, batch_size: 0128}
train: {epochs: 010}
)";

}  // namespace

TEST_CASE("integers with a leading zero are decimal, as YAML 1.2 reads them", "[config][yaml]") {
  const Config c = parse_config(kConfig, "z.yaml", {});
  CHECK(c.epochs == 10);
  CHECK(c.data.batch_size == 128);
  const Model m(c.input_shape, c.layers, c.init, c.file, c.blocks);
  CHECK(m.layers()[1]->output_shape() == Shape{32});  // units: 032, not 26
  const Config s = parse_config(kConfig, "z.yaml", {"model.input_shape=[01, 04, 04]"});
  CHECK(s.input_shape == Shape{1, 4, 4});
  CHECK(parse_config(kConfig, "z.yaml", {"train.epochs=0o17"}).epochs == 15);
  CHECK(parse_config(kConfig, "z.yaml", {"train.epochs=0x1F"}).epochs == 31);
  CHECK(parse_config(kConfig, "z.yaml", {"train.epochs=+7"}).epochs == 7);
  CHECK(parse_config(kConfig, "z.yaml", {"train.seed=00042"}).seed == 42);
  CHECK_THROWS_WITH(parse_config(kConfig, "z.yaml", {"train.epochs=0o18"}),
                    Contains("train.epochs: expected an integer, got '0o18'"));
  CHECK_THROWS_WITH(parse_config(kConfig, "z.yaml", {"train.epochs=12a"}), Contains("expected an integer"));
  CHECK_THROWS_WITH(parse_config(kConfig, "z.yaml", {"train.seed=99999999999999999999"}),
                    Contains("expected an integer"));
  CHECK_THROWS_WITH(parse_config(kConfig, "z.yaml", {"train.epochs=-0x5"}), Contains("expected an integer"));
}
