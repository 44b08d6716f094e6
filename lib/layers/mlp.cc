#include "lib/layers/mlp.h"

#include "lib/config/node_reader.h"
#include "lib/layers/activation.h"

namespace trainer {

std::vector<YAML::Node> expand_mlp(NodeReader& r) {
  if (!r.has("depth"))
    r.fail("depth", "is required: the number of dense layers, output layer included, e.g. depth: 8");
  const int64_t depth = r.integer("depth", 1, 1, 64);
  const int64_t width = r.integer("width", 4, 1, int64_t(1) << 24);
  const int64_t growth = r.integer("growth", 2, 1, 16);
  if (!r.has("final_units"))
    r.fail("final_units", "is required: the outputs of the last layer (classes), e.g. final_units: 2");
  const int64_t final_units = r.integer("final_units", 1, 1, int64_t(1) << 24);
  std::vector<std::string> allowed;
  for (const auto& a : activation_names())
    if (a != "softmax" && a != "log_softmax") allowed.push_back(a);
  const std::string activation = r.choice("activation", "relu", allowed);
  const bool use_bias = r.boolean("use_bias", true);

  std::vector<YAML::Node> out;
  int64_t units = width;
  for (int64_t i = 0; i + 1 < depth; ++i) {
    if (units > (int64_t(1) << 24))
      r.fail("depth", "gives a hidden layer wider than 2^24 units; lower depth, width or growth");
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
