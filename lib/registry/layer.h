// Layer: what a layer computes, independent of any backend.
//
// A layer owns its hyper-parameters, infers its per-sample output shape from its input shape and
// declares its parameter tensors. It owns no memory: the model lays every parameter out in one
// contiguous arena (llm.c style) and each backend's kernel gets views of its tensors. How the
// computation runs is the business of the kernels registered for each backend (see
// lib/backend/layer_kernel.h).
#pragma once

#include <yaml-cpp/yaml.h>

#include <memory>
#include <string>
#include <vector>

#include "lib/core/shape.h"

namespace trainer {

// How a parameter tensor is initialized; fans come from the layer.
enum class ParamRole { weight, bias, gamma, beta, embedding };

struct ParamSpec {
  std::string name;  // "weight", "bias": the tensor is "<layer name>.<name>" in checkpoints
  Shape shape;       // PyTorch layout: dense (out, in), conv2d (out, in, kh, kw)
  ParamRole role = ParamRole::weight;
  int64_t fan_in = 1;
  int64_t fan_out = 1;
};

// Non-trainable per-layer state kept with the model (batchnorm running stats).
struct BufferSpec {
  std::string name;
  Shape shape;
  float init = 0.f;
};

class Layer {
 public:
  virtual ~Layer() = default;

  const std::string& type() const { return type_; }
  const std::string& name() const { return name_; }
  const Shape& input_shape() const { return ins_.at(0); }
  // Every input's per-sample shape, in the order of the layer's `inputs:` (one for most layers).
  const std::vector<Shape>& input_shapes() const { return ins_; }
  const Shape& output_shape() const { return out_; }

  // Infers and records the per-sample output shape. Throws ConfigError naming index, type and
  // shapes on a mismatch.
  void build(const Shape& input, int index) { build(std::vector<Shape>{input}, index); }
  void build(const std::vector<Shape>& inputs, int index);
  // How many inputs the layer takes (`inputs:`); most take one, add and concat two or more.
  virtual int min_inputs() const { return 1; }
  virtual int max_inputs() const { return 1; }

  virtual std::vector<ParamSpec> param_specs() const { return {}; }
  virtual std::vector<BufferSpec> buffer_specs() const { return {}; }
  // The layer whose "weight" tensor this layer's "weight" is (dense's tie_to), "": none. The model
  // keeps the tensor once, in the named layer's place (lib/model/model.h, Model::layer_params).
  virtual std::string tie_to() const { return {}; }
  // True when the output is the input reinterpreted (flatten): no kernel runs, memory is shared.
  virtual bool aliases_input() const { return false; }
  // Resolved hyper-parameters, for --print-config and run directories.
  virtual void describe(YAML::Node& out) const {}
  // Floating-point operations of the forward pass per sample, counting the multiply-adds of
  // convolutions and matrix products as 2 (the convention of MFU figures); 0 for layers whose
  // work is element-wise. A training step is counted as 3 forwards (forward, backward-data,
  // backward-weights).
  virtual double forward_flops() const { return 0; }

  int64_t num_params() const;

  void set_identity(std::string type, std::string name) {
    type_ = std::move(type);
    name_ = std::move(name);
  }

 protected:
  // Returns the output shape or throws via shape_error().
  virtual Shape infer(const Shape& input) = 0;  // may resolve derived geometry
  // Layers of several inputs override this one; the default passes the one input to infer().
  virtual Shape infer_inputs(const std::vector<Shape>& inputs) { return infer(inputs[0]); }
  [[noreturn]] void shape_error(const std::string& what) const;
  // shape_error() unless `shape` fits in one tensor (kMaxTensorElements); `what` names it.
  void check_size(const std::string& what, const Shape& shape, bool per_sample = true) const;

 private:
  std::string type_, name_;
  std::vector<Shape> ins_;
  Shape out_;
  int index_ = -1;
};

}  // namespace trainer
