#include "lib/export/onnx_graph.h"

namespace trainer::onnx {

std::string GraphBuilder::unique(const std::string& want) {
  std::string name = want;
  for (int k = 2; taken_.count(name); ++k) name = want + "_" + std::to_string(k);
  taken_.insert(name);
  return name;
}

std::string GraphBuilder::floats(const std::string& name, const std::vector<int64_t>& dims,
                                 const float* values) {
  const std::string unique_name = unique(name);
  g_.initializers.push_back(Tensor::floats(unique_name, dims, values));
  return unique_name;
}

std::string GraphBuilder::shared_floats(const std::string& name, const std::vector<int64_t>& dims,
                                        const float* values) {
  auto it = shared_.find(name);
  if (it != shared_.end()) return it->second;
  return shared_[name] = floats(name, dims, values);
}

std::string GraphBuilder::int64s(const std::string& name, const std::vector<int64_t>& dims,
                                 const std::vector<int64_t>& values) {
  const std::string unique_name = unique(name);
  g_.initializers.push_back(Tensor::int64s(unique_name, dims, values));
  return unique_name;
}

std::string GraphBuilder::node(const std::string& op, const std::vector<std::string>& inputs,
                               const std::string& output, std::vector<Attribute> attributes) {
  Node n;
  n.op_type = op;
  n.outputs = {unique(output)};
  n.name = n.outputs[0];
  n.inputs = inputs;
  n.attributes = std::move(attributes);
  g_.nodes.push_back(std::move(n));
  return g_.nodes.back().outputs[0];
}

std::vector<std::string> GraphBuilder::node_outputs(const std::string& op,
                                                    const std::vector<std::string>& inputs,
                                                    const std::vector<std::string>& outputs,
                                                    std::vector<Attribute> attributes) {
  Node n;
  n.op_type = op;
  for (const std::string& o : outputs) n.outputs.push_back(unique(o));
  n.name = n.outputs[0];
  n.inputs = inputs;
  n.attributes = std::move(attributes);
  g_.nodes.push_back(std::move(n));
  return g_.nodes.back().outputs;
}

}  // namespace trainer::onnx
