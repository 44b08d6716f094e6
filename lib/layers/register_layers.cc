// Every built-in layer type, by its YAML name.
#include "lib/config/node_reader.h"
#include "lib/core/error.h"
#include "lib/layers/activation.h"
#include "lib/layers/batchnorm.h"
#include "lib/layers/conv1d.h"
#include "lib/layers/conv2d.h"
#include "lib/layers/dense.h"
#include "lib/layers/dropout.h"
#include "lib/layers/embedding.h"
#include "lib/layers/flatten.h"
#include "lib/layers/global_pool.h"
#include "lib/layers/pool1d.h"
#include "lib/layers/pool2d.h"
#include "lib/registry/registry.h"

namespace trainer {

void register_builtin_layers(Registry& r) {
  r.add_layer("dense", "fully connected: units, use_bias",
              [](NodeReader& n) { return std::make_unique<Dense>(n); });
  r.add_layer("conv2d", "2-D convolution: filters, kernel_size, strides, padding, use_bias",
              [](NodeReader& n) { return std::make_unique<Conv2d>(n); });
  r.add_layer("maxpool2d", "2-D max pooling: pool_size, strides, padding",
              [](NodeReader& n) { return std::make_unique<Pool2d>(n, Pool2d::Kind::max); });
  r.add_layer("avgpool2d", "2-D average pooling: pool_size, strides, padding",
              [](NodeReader& n) { return std::make_unique<Pool2d>(n, Pool2d::Kind::avg); });
  r.add_layer("embedding", "token ids (L) -> vectors (output_dim, L): input_dim, output_dim",
              [](NodeReader& n) { return std::make_unique<Embedding>(n); });
  r.add_layer("conv1d", "1-D convolution on (C, L): filters, kernel_size, strides, padding, use_bias",
              [](NodeReader& n) { return std::make_unique<Conv1d>(n); });
  r.add_layer("maxpool1d", "1-D max pooling: pool_size, strides, padding",
              [](NodeReader& n) { return std::make_unique<Pool1d>(n, Pool1d::Kind::max); });
  r.add_layer("avgpool1d", "1-D average pooling: pool_size, strides, padding",
              [](NodeReader& n) { return std::make_unique<Pool1d>(n, Pool1d::Kind::avg); });
  r.add_layer("global_avg_pool", "mean over all spatial positions: (C, ...) -> (C)",
              [](NodeReader&) { return std::make_unique<GlobalAvgPool>(); });
  r.add_layer("batchnorm", "batch normalization over channel axis 0: momentum, epsilon",
              [](NodeReader& n) { return std::make_unique<BatchNorm>(n); });
  // A macro the model expands into dense + activation layers (lib/layers/mlp.h); registered so
  // that it is listed and suggested like any other type. It never becomes a Layer itself.
  r.add_layer("mlp", "dense stack: depth, width, growth, final_units, activation, use_bias",
              [](NodeReader&) -> std::unique_ptr<Layer> {
                throw InternalError("mlp is expanded by the model, not built as one layer");
              });
  r.add_layer("flatten", "reshape to (features)", [](NodeReader&) { return std::make_unique<Flatten>(); });
  r.add_layer("dropout", "element-wise dropout: rate",
              [](NodeReader& n) { return std::make_unique<Dropout>(n, false); });
  r.add_layer("dropout2d", "channel-wise dropout: rate",
              [](NodeReader& n) { return std::make_unique<Dropout>(n, true); });
  const std::vector<std::pair<const char*, ActivationKind>> acts{
      {"relu", ActivationKind::relu},
      {"sigmoid", ActivationKind::sigmoid},
      {"tanh", ActivationKind::tanh},
      {"gelu", ActivationKind::gelu},
      {"leaky_relu", ActivationKind::leaky_relu},
      {"softmax", ActivationKind::softmax},
      {"log_softmax", ActivationKind::log_softmax}};
  for (const auto& a : acts) {
    ActivationKind kind = a.second;
    r.add_layer(a.first, kind == ActivationKind::leaky_relu ? "activation: alpha" : "activation",
                [kind](NodeReader& n) { return std::make_unique<Activation>(n, kind); });
  }
}

}  // namespace trainer
