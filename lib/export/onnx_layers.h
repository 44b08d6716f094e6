// Each layer type as ONNX operators (opset 17), in inference form: what `trainer eval` and
// `trainer predict` compute.
//
//   dense                  Gemm(x, W, b, transB=1)                        W: (units, in), PyTorch's
//   conv2d, conv1d         Conv(x, W, b) with kernel_shape, strides, pads (begin..., end...: the
//                          resolved padding, TensorFlow's split for `same`), group
//   maxpool2d/1d           MaxPool (padding is -inf, as ours)
//   avgpool2d/1d           AveragePool, count_include_pad=0 (padded positions are left out of the
//                          divisor, as ours)
//   global_avg/max_pool    GlobalAveragePool / GlobalMaxPool, then Flatten: (B, C, ...) -> (B, C);
//                          channels_last: ReduceMean / ReduceMax over the positions
//   batchnorm              BatchNormalization with the running statistics (training_mode 0)
//   relu, sigmoid, tanh, leaky_relu, softmax, log_softmax
//                          Relu, Sigmoid, Tanh, LeakyRelu(alpha), Softmax / LogSoftmax (axis -1:
//                          the features of a flat input)
//   gelu                   the erf form, x * 0.5 * (1 + Erf(x / sqrt 2)), from opset 17's ops
//   embedding              ids -> Where(ids > 0, ids, 0) -> Min(., V-1) -> Cast(int64) -> Gather
//                          -> Transpose to (B, D, L): the kernels' clamping (lib/core/embedding_formula.h)
//   add                    Add, left to right;  concat  Concat(axis=1)
//   flatten                Flatten(axis=1);  identity, dropout, dropout2d  Identity
// A type without a translation is a ConfigError naming the layer and the types that have one.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "lib/core/shape.h"
#include "lib/export/onnx_graph.h"
#include "lib/registry/layer.h"

namespace trainer::onnx {

// A layer's parameters and buffers in host memory, by their spec names ("weight", "running_var").
struct LayerTensors {
  struct View {
    Shape shape;
    const float* data = nullptr;
    std::string name;  // the initializer's ("<layer>.<param>", a tied weight its owner's), "": the layer's
  };
  std::map<std::string, View> by_name;
  // InternalError naming the layer when it has no such tensor.
  const View& at(const Layer& layer, const std::string& name) const;
};

// The layer types export_layer() translates, sorted.
std::vector<std::string> exportable_layer_types();

// Appends the nodes that compute `layer` from `inputs` (one value name per layer input, in the
// layer's order) and returns the name of its output: `output`, made unique.
std::string export_layer(GraphBuilder& b, const Layer& layer, const LayerTensors& tensors,
                         const std::vector<std::string>& inputs, const std::string& output);

}  // namespace trainer::onnx
