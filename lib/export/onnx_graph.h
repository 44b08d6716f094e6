// GraphBuilder: appends nodes and initializers to an ONNX graph (lib/export/onnx_writer.h) under
// unique names. Value names are the model's own where it has them (a layer's output is named
// after the layer, "layer1.0.conv1"; its tensors as in the checkpoint, "layer1.0.conv1.weight"),
// so the exported graph reads like `trainer summary` and like the PyTorch state_dict; a name
// already taken gets "_2", "_3"...
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "lib/export/onnx_writer.h"

namespace trainer::onnx {

class GraphBuilder {
 public:
  explicit GraphBuilder(Graph& g) : g_(g) {}

  // `want` if no value has that name yet, else the first free "want_N".
  std::string unique(const std::string& want);
  // Adds a float initializer (dims, numel(dims) values); returns its name.
  std::string floats(const std::string& name, const std::vector<int64_t>& dims, const float* values);
  std::string floats(const std::string& name, const std::vector<int64_t>& dims,
                     const std::vector<float>& values) {
    return floats(name, dims, values.data());
  }
  // An initializer that several nodes read (a tied weight): the first call adds it under `name`,
  // later calls with the same name return it.
  std::string shared_floats(const std::string& name, const std::vector<int64_t>& dims, const float* values);
  std::string scalar(const std::string& name, float value) { return floats(name, {}, &value); }
  // Adds an int64 initializer (shapes, indices); returns its name.
  std::string int64s(const std::string& name, const std::vector<int64_t>& dims,
                     const std::vector<int64_t>& values);
  // Adds a node whose one output is named `output` (made unique); returns that name. The node is
  // named after its output.
  std::string node(const std::string& op, const std::vector<std::string>& inputs, const std::string& output,
                   std::vector<Attribute> attributes = {});
  // A node of several outputs (TopK, LSTM's Y and Y_h): their names, made unique, in order.
  std::vector<std::string> node_outputs(const std::string& op, const std::vector<std::string>& inputs,
                                        const std::vector<std::string>& outputs,
                                        std::vector<Attribute> attributes = {});
  Graph& graph() { return g_; }

 private:
  Graph& g_;
  std::set<std::string> taken_;
  std::map<std::string, std::string> shared_;  // shared_floats: requested name -> initializer
};

}  // namespace trainer::onnx
