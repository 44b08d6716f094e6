// The config's schema, reference and help are printed from the key declarations that validate
// configs (lib/schema): every declared section has a form and every variant a line, the schema's
// device pattern is parse_device()'s, and `trainer schema` / `trainer help` print what the
// declarations say. ctest config_schema checks the schema against configs with python3-jsonschema;
// ctest config_docs_fresh checks docs/ against the binary.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <regex>

#include "lib/backend/device_spec.h"
#include "lib/config/config_keys.h"
#include "lib/registry/registry.h"
#include "lib/schema/config_tree.h"
#include "lib/schema/key_help.h"
#include "lib/schema/key_text.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;

namespace {

// Every node of the tree, depth first.
void walk(const ConfigNode& n, std::vector<const ConfigNode*>& out) {
  out.push_back(&n);
  for (const ConfigNode& c : n.children) walk(c, out);
}

}  // namespace

TEST_CASE("the config tree gives every declared section key a form and every variant a line", "[schema]") {
  std::vector<const ConfigNode*> nodes;
  walk(config_tree(), nodes);  // building it throws for a section key without a form
  size_t layer_lists = 0;
  for (const ConfigNode* n : nodes) {
    CAPTURE(n->path);
    for (const KeySpec& k : n->keys) {
      CAPTURE(k.name);
      CHECK(!k.doc.empty());
      if (k.type == KeySpec::Type::section) CHECK(n->child(k.name) != nullptr);
    }
    for (const KeyVariant& v : n->variants) {
      CAPTURE(v.name);
      CHECK(!v.doc.empty());
      for (const KeySpec& k : v.keys) CHECK(!k.doc.empty());
    }
    if (n->layer_items) {
      ++layer_lists;
      std::vector<std::string> types;
      for (const KeyVariant& v : n->variants) types.push_back(v.name);
      CHECK(types == Registry::global().layer_types());
    }
  }
  CHECK(layer_lists == 2);  // model.layers and a block's layers
  CHECK(config_tree().child("data")->child("train")->variant_key == "format");
}

TEST_CASE("the schema's device pattern accepts exactly the strings parse_device accepts",
          "[schema][device]") {
  const std::regex pattern(kDevicePattern);
  for (const char* s :
       {"cpu",       "auto",      "gpu",    "gpu:0",      "gpu:7",  "gpu:999",  "gpu:007",  "gpu:0,1",
        "gpu:3,1,2", "gpu:all",   "",       "GPU",        "gpu:",   "gpu:1000", "gpu:-1",   "gpu:1x",
        "gpu0",      "cuda:0",    "cpu:0",  " cpu",       "gpu:0,", "gpu:,1",   "gpu:0,,1", "gpu:0;1",
        "gpu:al",    "gpu:all,1", "gpu: 0", "gpu:0,1000", "autoo",  "gpu:0\n"}) {
    CAPTURE(s);
    CHECK(std::regex_match(std::string(s), pattern) == parse_device(s).has_value());
  }
}

TEST_CASE("key text: numbers short, ranges and defaults as the declarations give them", "[schema]") {
  CHECK(number_text(1e6) == "1e6");
  CHECK(number_text(1e-8) == "1e-8");
  CHECK(number_text(0.001) == "0.001");
  CHECK(number_text(65536) == "65536");
  const KeySpec& epochs = key_named(train_keys(), "epochs");
  CHECK(value_text(epochs) == "an integer from 1 to 1000000");
  CHECK(default_text(epochs) == "10");
  CHECK(default_text(key_named(random_resized_crop_keys(), "scale")) == "[0.08, 1]");
  CHECK(value_text(key_named(train_keys(), "loss_scale")) ==
        "auto, dynamic, none, or a number from 1e-30 to 1e38");
}

TEST_CASE("trainer schema prints a draft 2020-12 schema: per layer type an if/then on type",
          "[schema][cli]") {
  const auto r = test::run_trainer("schema");
  REQUIRE(r.exit_code == 0);
  const nlohmann::json s = nlohmann::json::parse(r.out);
  REQUIRE(s["$schema"] == "https://json-schema.org/draft/2020-12/schema");
  REQUIRE(s["additionalProperties"] == false);
  REQUIRE(s["required"] == nlohmann::json::array({"model", "data"}));
  const nlohmann::json& layer = s["$defs"]["layer"];
  REQUIRE(layer["allOf"].size() == Registry::global().layer_types().size());
  bool conv2d = false;
  for (const auto& branch : layer["allOf"]) {
    if (branch["if"]["properties"]["type"]["const"] != "conv2d") continue;
    conv2d = true;
    const auto& then = branch["then"];
    REQUIRE(then["additionalProperties"] == false);
    REQUIRE(then["required"] == nlohmann::json::array({"filters", "kernel_size"}));
    REQUIRE(then["properties"]["filters"]["minimum"] == 1);
    REQUIRE(then["properties"]["padding"]["default"] == "valid");
  }
  REQUIRE(conv2d);
  // Keys of one optimizer type are not keys of another; the default type needs no `type:`.
  for (const auto& branch : s["properties"]["optimizer"]["allOf"]) {
    const std::string type = branch["if"]["properties"]["type"]["const"];
    REQUIRE(branch["then"]["properties"].contains("nesterov") == (type == "sgd"));
    REQUIRE(branch["if"].contains("required") == (type != "adam"));
  }
  // --markdown: the reference, a section per mapping.
  const auto md = test::run_trainer("schema --markdown");
  REQUIRE(md.exit_code == 0);
  REQUIRE_THAT(md.out, Contains("## `optimizer`") && Contains("### `optimizer` type `sgd`") &&
                           Contains("| `nesterov` | true or false | `false` |") &&
                           Contains("### `model.layers` type `conv2d`"));
  REQUIRE(test::run_trainer("help config").out == md.out);
}

TEST_CASE("trainer help prints a key's documentation, the layer types with their keys, and topics",
          "[schema][cli]") {
  const auto nesterov = test::run_trainer("help optimizer.nesterov");
  REQUIRE(nesterov.exit_code == 0);
  REQUIRE(nesterov.out ==
          "optimizer.nesterov (type sgd): true or false; default false\n"
          "  Nesterov momentum (needs momentum > 0, dampening 0)\n");
  const auto lr = test::run_trainer("help optimizer.lr");
  REQUIRE_THAT(
      lr.out,
      Contains("optimizer.lr (type sgd, rmsprop): a number from 0 to 1e6; default 0.01") &&
          Contains("optimizer.lr (type adam, adamw, nadam, lamb): a number from 0 to 1e6; default 0.001") &&
          Contains("optimizer.lr (type lion): a number from 0 to 1e6; default 0.0001"));
  const auto format = test::run_trainer("help data.train.format");
  REQUIRE(format.exit_code == 0);
  REQUIRE_THAT(format.out, Contains("data.train.format: one of these (default idx)") &&
                               Contains("image_folder") && Contains("keys: path (required), header = false"));
  REQUIRE_THAT(test::run_trainer("help conv2d.padding").out,
               Contains("model.layers.padding (type conv2d): valid, same, or an integer from 0 to 65536; "
                        "default valid"));
  REQUIRE_THAT(test::run_trainer("help model.layers.0.units").out, Contains("(type dense)"));
  REQUIRE_THAT(test::run_trainer("help train").out,
               Contains("train: the training loop") && Contains("epochs"));
  const auto layers = test::run_trainer("help layers");
  REQUIRE(layers.exit_code == 0);
  for (const std::string& type : Registry::global().layer_types()) {
    CAPTURE(type);
    REQUIRE_THAT(layers.out,
                 Contains("\n  " + type + " ") && Contains(Registry::global().layer(type, "").doc));
  }
  REQUIRE_THAT(layers.out, Contains("keys: filters (required), kernel_size (required), strides = [1, 1]"));
  REQUIRE_THAT(test::run_trainer("help").out, Contains("trainer help KEY"));
}

TEST_CASE("trainer help of an unknown key names the closest one and exits 2", "[schema][cli]") {
  const auto typo = test::run_trainer("help optimizer.nesterv");
  REQUIRE(typo.exit_code == 2);
  REQUIRE_THAT(typo.err, Contains("error: unknown config key 'optimizer.nesterv' (did you mean "
                                  "'optimizer.nesterov'?)"));
  REQUIRE(test::run_trainer("help data.train.formt").exit_code == 2);
  REQUIRE_THAT(test::run_trainer("help conv2d.kernal_size").err,
               Contains("did you mean 'conv2d.kernel_size'?"));
  REQUIRE_THAT(test::run_trainer("help optimizer..lr").err, Contains("unknown config key 'optimizer..lr'"));
}
