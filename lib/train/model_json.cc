#include "lib/train/model_json.h"

#include <cerrno>
#include <cstdlib>

namespace trainer {

nlohmann::json yaml_to_json(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& kv : n) o[kv.first.Scalar()] = yaml_to_json(kv.second);
      return o;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& v : n) a.push_back(yaml_to_json(v));
      return a;
    }
    case YAML::NodeType::Scalar: {
      const std::string& s = n.Scalar();
      if (n.Tag() != "!") {  // unquoted: a number or a boolean where it reads as one
        if (s == "true") return true;
        if (s == "false") return false;
        if (!s.empty()) {
          char* end = nullptr;
          errno = 0;
          const long long i = std::strtoll(s.c_str(), &end, 10);
          if (*end == '\0' && errno == 0) return i;
          errno = 0;
          const double d = std::strtod(s.c_str(), &end);
          if (*end == '\0' && errno == 0) return d;
        }
      }
      return s;
    }
    default:
      return nullptr;
  }
}

static nlohmann::json dims(const Shape& s) {
  nlohmann::json a = nlohmann::json::array();
  for (int64_t d : s.dims) a.push_back(d);
  return a;
}

nlohmann::json model_json(const Config& cfg, const Model& model) {
  nlohmann::json layers = nlohmann::json::array();
  const auto& ls = model.layers();
  for (size_t i = 0; i < ls.size(); ++i) {
    const Layer& l = *ls[i];
    nlohmann::json inputs = nlohmann::json::array();
    for (int p : model.layer_inputs(i))
      inputs.push_back(p < 0 ? std::string("input") : ls[size_t(p)]->name());
    nlohmann::json params = nlohmann::json::array(), buffers = nlohmann::json::array();
    for (int k : model.layer_params(i)) {  // a tied weight: its owner's tensor, by that name
      const TensorSlot& p = model.params()[size_t(k)];
      params.push_back({{"name", p.name}, {"shape", dims(p.shape)}});
    }
    for (const BufferSpec& b : l.buffer_specs())
      buffers.push_back({{"name", l.name() + "." + b.name}, {"shape", dims(b.shape)}});
    YAML::Node hyper;
    l.describe(hyper);
    layers.push_back({{"name", l.name()},
                      {"type", l.type()},
                      {"inputs", inputs},
                      {"output_shape", dims(l.output_shape())},
                      {"params", params},
                      {"buffers", buffers},
                      {"hyper", hyper.IsNull() ? nlohmann::json::object() : yaml_to_json(hyper)}});
  }
  int64_t buffers = 0;
  for (const TensorSlot& b : model.buffers()) buffers += b.shape.numel();
  return {{"input_shape", dims(model.input_shape())},
          {"total_params", model.num_params() + buffers},  // Keras': trainable + non-trainable
          {"trainable_params", model.num_params()},
          {"non_trainable_params", buffers},
          {"layers", layers},
          {"config", yaml_to_json(cfg.resolved)}};
}

}  // namespace trainer
