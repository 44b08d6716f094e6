// Float64 reference forwards of every layer type with a kernel: naive loops over the layer's
// resolved geometry, written from the layer headers' formulas, never from a kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "lib/registry/layer.h"

namespace trainer::conformance {

struct ReferenceInput {
  const Layer* layer = nullptr;
  int64_t batch = 0;
  bool training = true;
  int forwards = 1;                          // running statistics are updated once per forward
  std::vector<double> x;                     // (batch, input shape...)
  std::vector<std::vector<double>> params;   // one per ParamSpec, without slot padding
  std::vector<std::vector<double>> buffers;  // one per BufferSpec; updated in place
  uint64_t seed = 0, step = 0;               // dropout's mask stream
  int layer_index = 0;
};

// Returns y: (batch, output shape...).
using ReferenceForward = std::vector<double> (*)(ReferenceInput& in);

std::vector<double> reference_attention(ReferenceInput& in);
std::vector<double> reference_dense(ReferenceInput& in);
std::vector<double> reference_conv2d(ReferenceInput& in);
std::vector<double> reference_conv1d(ReferenceInput& in);
std::vector<double> reference_pool2d(ReferenceInput& in);  // max: padding never wins; avg: padding excluded
std::vector<double> reference_pool1d(ReferenceInput& in);
std::vector<double> reference_global_avg_pool(ReferenceInput& in);
std::vector<double> reference_global_max_pool(ReferenceInput& in);  // gradient to the first maximum
std::vector<double> reference_add(ReferenceInput& in);              // x: every input's batch in turn
std::vector<double> reference_concat(ReferenceInput& in);           // along the channels (axis 1)
std::vector<double> reference_activation(ReferenceInput& in);       // element-wise, softmax, log_softmax
std::vector<double> reference_dropout(ReferenceInput& in);
std::vector<double> reference_embedding(ReferenceInput& in);
std::vector<double> reference_batchnorm(ReferenceInput& in);
std::vector<double> reference_layer_norm(ReferenceInput& in);  // layer_norm and rms_norm
std::vector<double> reference_position_embedding(ReferenceInput& in);
std::vector<double> reference_recurrent(ReferenceInput& in);  // lstm and gru

// The row of a token id (lib/layers/embedding.h): integral ids in [0, vocab) map to themselves,
// others are clamped (NaN -> 0).
int64_t reference_token(float v, int64_t vocab);

}  // namespace trainer::conformance
