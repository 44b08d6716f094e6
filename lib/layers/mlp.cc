#include "lib/layers/mlp.h"

namespace trainer {

KeySpecs mlp_keys(const std::vector<std::string>& activations) {
  std::vector<std::string> allowed;
  for (const auto& a : activations)
    if (a != "softmax" && a != "log_softmax") allowed.push_back(a);
  return {integer_key("depth", 1, 1, 64, "dense layers, the output layer included")
              .require("is required: the number of dense layers, output layer included, e.g. depth: 8"),
          integer_key("width", 4, 1, int64_t(1) << 24, "units of the first hidden layer"),
          integer_key("growth", 2, 1, 16, "factor between consecutive hidden layers"),
          integer_key("final_units", 1, 1, int64_t(1) << 24, "outputs of the last layer")
              .require("is required: the outputs of the last layer (classes), e.g. final_units: 2"),
          choice_key("activation", "relu", allowed, "after every hidden layer"),
          bool_key("use_bias", true, "every dense layer adds a bias")};
}

std::vector<YAML::Node> expand_mlp(const KeyValues& v) {
  const int64_t depth = v.integer("depth"), width = v.integer("width"), growth = v.integer("growth");
  const int64_t final_units = v.integer("final_units");
  const std::string activation = v.string("activation");
  const bool use_bias = v.boolean("use_bias");

  std::vector<YAML::Node> out;
  int64_t units = width;
  for (int64_t i = 0; i + 1 < depth; ++i) {
    if (units > (int64_t(1) << 24))
      v.fail("depth", "gives a hidden layer wider than 2^24 units; lower depth, width or growth");
    YAML::Node dense(YAML::NodeType::Map);
    dense["type"] = "dense";
    dense["units"] = units;
    dense["use_bias"] = use_bias;
    out.push_back(dense);
    YAML::Node act(YAML::NodeType::Map);
    act["type"] = activation;
    out.push_back(act);
    units *= growth;
  }
  YAML::Node last(YAML::NodeType::Map);
  last["type"] = "dense";
  last["units"] = final_units;
  last["use_bias"] = use_bias;
  out.push_back(last);
  return out;
}

}  // namespace trainer
