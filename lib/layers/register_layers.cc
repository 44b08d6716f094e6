// Every built-in layer type, by its YAML name.
#include "lib/layers/activation.h"
#include "lib/layers/add.h"
#include "lib/layers/batchnorm.h"
#include "lib/layers/concat.h"
#include "lib/layers/conv1d.h"
#include "lib/layers/conv2d.h"
#include "lib/layers/dense.h"
#include "lib/layers/dropout.h"
#include "lib/layers/embedding.h"
#include "lib/layers/flatten.h"
#include "lib/layers/global_pool.h"
#include "lib/layers/identity.h"
#include "lib/layers/mlp.h"
#include "lib/layers/pool1d.h"
#include "lib/layers/pool2d.h"
#include "lib/registry/registry.h"

namespace trainer {

// Each entry: the type name, the keys it declares (next to its constructor, which reads them
// validated), how to build it, and its traits. Activations come first: the `activation:` shortcut
// of dense and the convolutions and the mlp's `activation` key allow the types registered so far.
void register_builtin_layers(Registry& r) {
  const std::vector<std::pair<const char*, ActivationKind>> acts{
      {"relu", ActivationKind::relu},
      {"sigmoid", ActivationKind::sigmoid},
      {"tanh", ActivationKind::tanh},
      {"gelu", ActivationKind::gelu},
      {"leaky_relu", ActivationKind::leaky_relu},
      {"softmax", ActivationKind::softmax},
      {"log_softmax", ActivationKind::log_softmax}};
  LayerTraits activation;
  activation.activation = true;
  for (const auto& a : acts) {
    ActivationKind kind = a.second;
    r.add_layer(
        a.first, Activation::keys(kind),
        [kind](const KeyValues& v) { return std::make_unique<Activation>(v, kind); }, activation);
  }
  LayerTraits shortcut;
  shortcut.activation_shortcut = true;
  r.add_layer(
      "dense", Dense::keys(), [](const KeyValues& v) { return std::make_unique<Dense>(v); }, shortcut);
  r.add_layer(
      "conv2d", Conv2d::keys(), [](const KeyValues& v) { return std::make_unique<Conv2d>(v); }, shortcut);
  r.add_layer(
      "conv1d", Conv1d::keys(), [](const KeyValues& v) { return std::make_unique<Conv1d>(v); }, shortcut);
  r.add_layer("maxpool2d", Pool2d::keys(),
              [](const KeyValues& v) { return std::make_unique<Pool2d>(v, Pool2d::Kind::max); });
  r.add_layer("avgpool2d", Pool2d::keys(),
              [](const KeyValues& v) { return std::make_unique<Pool2d>(v, Pool2d::Kind::avg); });
  r.add_layer("maxpool1d", Pool1d::keys(),
              [](const KeyValues& v) { return std::make_unique<Pool1d>(v, Pool1d::Kind::max); });
  r.add_layer("avgpool1d", Pool1d::keys(),
              [](const KeyValues& v) { return std::make_unique<Pool1d>(v, Pool1d::Kind::avg); });
  r.add_layer("embedding", Embedding::keys(),
              [](const KeyValues& v) { return std::make_unique<Embedding>(v); });
  r.add_layer("global_avg_pool", {}, [](const KeyValues&) { return std::make_unique<GlobalAvgPool>(); });
  r.add_layer("global_max_pool", {}, [](const KeyValues&) { return std::make_unique<GlobalMaxPool>(); });
  r.add_layer("batchnorm", BatchNorm::keys(),
              [](const KeyValues& v) { return std::make_unique<BatchNorm>(v); });
  r.add_layer("flatten", {}, [](const KeyValues&) { return std::make_unique<Flatten>(); });
  r.add_layer("identity", {}, [](const KeyValues&) { return std::make_unique<Identity>(); });
  // Several inputs (`inputs: [a, b]`): the element-wise sum, and the join along the channels.
  r.add_layer("add", {}, [](const KeyValues&) { return std::make_unique<Add>(); });
  r.add_layer("concat", {}, [](const KeyValues&) { return std::make_unique<Concat>(); });
  r.add_layer("dropout", Dropout::keys(),
              [](const KeyValues& v) { return std::make_unique<Dropout>(v, false); });
  r.add_layer("dropout2d", Dropout::keys(),
              [](const KeyValues& v) { return std::make_unique<Dropout>(v, true); });
  // A macro: the model expands it into dense + activation layers before shapes are inferred.
  r.add_macro("mlp", mlp_keys(r.activation_types()), expand_mlp);
}

}  // namespace trainer
