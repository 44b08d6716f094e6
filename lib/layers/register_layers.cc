// Every built-in layer type, by its YAML name.
#include "lib/layers/activation.h"
#include "lib/layers/add.h"
#include "lib/layers/attention.h"
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
#include "lib/layers/layer_norm.h"
#include "lib/layers/mlp.h"
#include "lib/layers/pool1d.h"
#include "lib/layers/pool2d.h"
#include "lib/layers/position_embedding.h"
#include "lib/layers/recurrent.h"
#include "lib/registry/registry.h"

namespace trainer {

// Each entry: the type name, the keys it declares (next to its constructor, which reads them
// validated), how to build it, and its traits. Activations come first: the `activation:` shortcut
// of dense and the convolutions and the mlp's `activation` key allow the types registered so far.
void register_builtin_layers(Registry& r) {
  struct Act {
    const char* type;
    ActivationKind kind;
    const char* doc;
  };
  const std::vector<Act> acts{
      {"relu", ActivationKind::relu, "max(0, x), element-wise"},
      {"sigmoid", ActivationKind::sigmoid, "1 / (1 + exp(-x)), element-wise"},
      {"tanh", ActivationKind::tanh, "tanh(x), element-wise"},
      {"gelu", ActivationKind::gelu,
       "x * Phi(x), the exact GELU (PyTorch's default) or its tanh approximation, element-wise"},
      {"leaky_relu", ActivationKind::leaky_relu, "x for x >= 0, alpha * x below, element-wise"},
      {"softmax", ActivationKind::softmax, "exp(x) / sum(exp(x)) over a flat input (the classes)"},
      {"log_softmax", ActivationKind::log_softmax,
       "log(softmax(x)) over a flat input (the nll loss's input)"}};
  LayerTraits activation;
  activation.activation = true;
  for (const Act& a : acts) {
    ActivationKind kind = a.kind;
    r.add_layer(
        a.type, a.doc, Activation::keys(kind),
        [kind](const KeyValues& v) { return std::make_unique<Activation>(v, kind); }, activation);
  }
  LayerTraits shortcut;
  shortcut.activation_shortcut = true;
  r.add_layer(
      "dense", "fully connected: y = x W^T + b over a flat input (Keras Dense, torch.nn.Linear)",
      Dense::keys(), [](const KeyValues& v) { return std::make_unique<Dense>(v); }, shortcut);
  r.add_layer(
      "conv2d", "2-D convolution over (channels, height, width) (Keras Conv2D, torch.nn.Conv2d)",
      Conv2d::keys(), [](const KeyValues& v) { return std::make_unique<Conv2d>(v); }, shortcut);
  r.add_layer(
      "conv1d", "1-D convolution over (channels, length) (Keras Conv1D, torch.nn.Conv1d)", Conv1d::keys(),
      [](const KeyValues& v) { return std::make_unique<Conv1d>(v); }, shortcut);
  r.add_layer("maxpool2d", "the maximum of each 2-D window (MaxPool2d)", Pool2d::keys(),
              [](const KeyValues& v) { return std::make_unique<Pool2d>(v, Pool2d::Kind::max); });
  r.add_layer("avgpool2d", "the mean of each 2-D window (AvgPool2d)", Pool2d::keys(),
              [](const KeyValues& v) { return std::make_unique<Pool2d>(v, Pool2d::Kind::avg); });
  r.add_layer("maxpool1d", "the maximum of each window along the length (MaxPool1d)", Pool1d::keys(),
              [](const KeyValues& v) { return std::make_unique<Pool1d>(v, Pool1d::Kind::max); });
  r.add_layer("avgpool1d", "the mean of each window along the length (AvgPool1d)", Pool1d::keys(),
              [](const KeyValues& v) { return std::make_unique<Pool1d>(v, Pool1d::Kind::avg); });
  r.add_layer("embedding", "a learned vector per token id: (L) ids -> (output_dim, L) (Keras Embedding)",
              Embedding::keys(), [](const KeyValues& v) { return std::make_unique<Embedding>(v); });
  r.add_layer(
      "global_avg_pool",
      "the mean over every position of each channel: (C, ...) -> (C), or with channels_last (..., C) -> (C)",
      GlobalPool::keys(), [](const KeyValues& v) { return std::make_unique<GlobalAvgPool>(v); });
  r.add_layer(
      "global_max_pool",
      "the maximum over every position of each channel: (C, ...) -> (C), or with channels_last (..., C) "
      "-> (C)",
      GlobalPool::keys(), [](const KeyValues& v) { return std::make_unique<GlobalMaxPool>(v); });
  r.add_layer("batchnorm", "batch normalization per channel, running statistics for inference (BatchNorm)",
              BatchNorm::keys(), [](const KeyValues& v) { return std::make_unique<BatchNorm>(v); });
  r.add_layer("position_embedding",
              "a learned vector per position added to the input, (L, D) after an embedding with "
              "channels_first: false (GPT-2's wpe)",
              {}, [](const KeyValues&) { return std::make_unique<PositionEmbedding>(); });
  r.add_layer("layer_norm", "normalization of each position's features, over the last axis (LayerNorm)",
              LayerNorm::keys(false),
              [](const KeyValues& v) { return std::make_unique<LayerNorm>(v, false); });
  r.add_layer("rms_norm",
              "scaling of each position's features by their root mean square, over the last axis (RMSNorm)",
              LayerNorm::keys(true), [](const KeyValues& v) { return std::make_unique<LayerNorm>(v, true); });
  r.add_layer("multi_head_attention",
              "self-attention over the rows of a sequence (L, D) with its input and output projections "
              "(GPT-2's attention; nn.MultiheadAttention)",
              MultiHeadAttention::keys(),
              [](const KeyValues& v) { return std::make_unique<MultiHeadAttention>(v); });
  r.add_layer("lstm",
              "a long short-term memory over the rows of a sequence (L, D): (L, units) or (units) "
              "(nn.LSTM, Keras LSTM)",
              Recurrent::keys(Recurrent::Cell::lstm),
              [](const KeyValues& v) { return std::make_unique<Recurrent>(v, Recurrent::Cell::lstm); });
  r.add_layer("gru",
              "a gated recurrent unit over the rows of a sequence (L, D): (L, units) or (units) "
              "(nn.GRU, Keras GRU)",
              Recurrent::keys(Recurrent::Cell::gru),
              [](const KeyValues& v) { return std::make_unique<Recurrent>(v, Recurrent::Cell::gru); });
  r.add_layer("flatten", "(C, H, W) -> (C * H * W), channel-major", {},
              [](const KeyValues&) { return std::make_unique<Flatten>(); });
  r.add_layer("identity", "its input, unchanged", {},
              [](const KeyValues&) { return std::make_unique<Identity>(); });
  // Several inputs (`inputs: [a, b]`): the element-wise sum, and the join along the channels.
  r.add_layer("add", "the element-wise sum of two or more inputs of one shape (inputs: [a, b])", {},
              [](const KeyValues&) { return std::make_unique<Add>(); });
  r.add_layer("concat", "two or more inputs joined along the channels (inputs: [a, b])", {},
              [](const KeyValues&) { return std::make_unique<Concat>(); });
  r.add_layer("dropout",
              "in training, zeroes each value with probability rate and scales the rest by "
              "1 / (1 - rate); identity in inference",
              Dropout::keys(), [](const KeyValues& v) { return std::make_unique<Dropout>(v, false); });
  r.add_layer("dropout2d", "dropout of whole channels (Dropout2d)", Dropout::keys(),
              [](const KeyValues& v) { return std::make_unique<Dropout>(v, true); });
  // A macro: the model expands it into dense + activation layers before shapes are inferred.
  r.add_macro("mlp", "a macro for depth dense layers, widths width * growth^i, an activation between them",
              mlp_keys(r.activation_types()), expand_mlp);
}

}  // namespace trainer
