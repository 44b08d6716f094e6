// batchnorm: batch normalization per channel (PyTorch's BatchNorm1d/2d/3d conventions).
//   x, y: (B, F) or (B, C, L) or (B, C, H, W) or (B, C, D, H, W); channel axis 1.
//   gamma, beta: (C) parameters (init 1 and 0), named weight and bias as in PyTorch;
//   running_mean, running_var: (C) buffers (0 and 1).
// Training: y = gamma * (x - mean_b) / sqrt(var_b + eps) + beta with the batch's mean and biased
//   variance over (B, spatial); then, PyTorch-style with momentum m (default 0.1):
//     running_mean = (1 - m) * running_mean + m * mean_b
//     running_var  = (1 - m) * running_var  + m * var_b * n / (n - 1)   (unbiased, n = B * spatial)
//   Keras' BatchNormalization(momentum=0.99, epsilon=1e-3) is momentum: 0.01, epsilon: 0.001 here.
// Eval: the running statistics take the place of the batch's, and nothing is updated.
#pragma once

#include "lib/keys/key_spec.h"
#include "lib/registry/layer.h"

namespace trainer {

class BatchNorm : public Layer {
 public:
  explicit BatchNorm(const KeyValues& v);
  static KeySpecs keys();
  float momentum = 0.1f;
  float epsilon = 1e-5f;
  int64_t channels() const { return input_shape()[0]; }
  int64_t spatial() const { return input_shape().numel() / input_shape()[0]; }

  std::vector<ParamSpec> param_specs() const override;
  std::vector<BufferSpec> buffer_specs() const override;
  void describe(YAML::Node& out) const override;

 protected:
  Shape infer(const Shape& in) override;
};

}  // namespace trainer
