// Model: the layer list from the config, every shape inferred, and the layout of all parameters
// in one flat arena. Backend-independent; the Executor runs it.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/keys/key_spec.h"
#include "lib/model/layer_list.h"
#include "lib/registry/layer.h"

namespace trainer {

// torch: PyTorch's defaults; keras: Glorot-uniform, zero biases; gpt2: GPT-2's (nanoGPT's and
// llm.c's): weights and embeddings N(0, 0.02), zero biases, and the projections into the residual
// stream (tensors named *c_proj.weight) N(0, 0.02 / sqrt(2 n)), n the multi_head_attention layers.
enum class InitScheme { torch, keras, gpt2 };

// One named tensor in the flat parameter (or buffer) arena.
struct TensorSlot {
  std::string name;  // "<layer>.<param>", e.g. "conv2d_1.weight"
  Shape shape;
  int64_t offset = 0;  // in floats
  int layer = 0;       // the layer that owns it (the first in run order to read it)
  ParamSpec spec;
  // Later layers that read it as one of theirs (a dense with tie_to): each one's backward runs
  // before the owner's, the first of them writes the gradient and the others and the owner add.
  std::vector<int> shared_with;
};

class Model {
 public:
  // layers: the YAML list under model.layers; file: for messages.
  // blocks: model.blocks (lib/model/layer_list.h), or null.
  Model(const Shape& input_shape, const YAML::Node& layers, InitScheme init, const std::string& file,
        const YAML::Node& blocks = YAML::Node());

  // One stage of a model split for model parallelism (lib/model/pipeline.h): layers [begin, end)
  // of `whole`, taken out of it (it is left without them), with the same names; the stage's input
  // is the output of layer begin - 1 (the model's input for begin 0). Every layer of the stage
  // must take its inputs from the stage or from that one tensor: ConfigError otherwise.
  Model(Model&& whole, size_t begin, size_t end);

  const Shape& input_shape() const { return input_; }
  // Throws ConfigError naming the layer and its shape when a tensor of `batch` samples (the input
  // or a layer's output) would exceed kMaxTensorElements. Called before any batch is allocated.
  void check_batch_size(int64_t batch) const;
  const Shape& output_shape() const { return layers_.back()->output_shape(); }
  // Every layer in run order (a topological order of the graph; the declaration order for a
  // stack); the last one's output is the model's output.
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  // Where layer i's inputs come from: indices into layers(), -1 for the model's input.
  const std::vector<int>& layer_inputs(size_t i) const { return inputs_.at(i); }
  // The layers that take layer `producer`'s output (-1: the model's input) as an input.
  std::vector<int> consumers(int producer) const;

  // Parameters: one flat arena, layer by layer, in declaration order; every tensor starts on the
  // one alignment (lib/model/arena_layout.h), and the arena's size is a multiple of it, so the
  // gradient and optimizer-state arenas that follow it keep the same per-tensor offsets.
  const std::vector<TensorSlot>& params() const { return params_; }
  int64_t param_arena_floats() const { return param_floats_; }
  int64_t num_params() const;  // excluding alignment padding; a tied tensor once
  // Layer i's parameters, one per ParamSpec in its order: indices into params(). A tied weight
  // (Layer::tie_to) is the named layer's tensor.
  const std::vector<int>& layer_params(size_t i) const { return layer_params_.at(i); }
  // The parameters layer i owns (its Param # in the summary; 0 for a tied weight).
  int64_t layer_num_params(size_t i) const;
  // Buffers (running statistics): their own arena, laid out by the same rule.
  const std::vector<TensorSlot>& buffers() const { return buffers_; }
  int64_t buffer_arena_floats() const { return buffer_floats_; }

  // Fills host copies of the arenas: PyTorch's default init (Kaiming-uniform a=sqrt(5), bias
  // U(+-1/sqrt(fan_in))) or Keras' (Glorot-uniform, zero bias). Deterministic in seed.
  void initialize(float* params, float* buffers, uint64_t seed) const;

  // Keras-style table: layer, type, output shape, parameters, connected to; then the totals.
  std::string summary() const;
  // The resolved layer list (every hyper-parameter, defaults filled) for --print-config.
  YAML::Node describe_layers() const;

 private:
  // Resolves inputs, orders the layers, checks the graph and infers every shape
  // (lib/model/model_graph.cc). made: the layers in declaration order; by_name: name -> index.
  void build_graph(const std::vector<LayerDecl>& decls, std::vector<std::unique_ptr<Layer>>& made,
                   const std::map<std::string, int>& by_name);
  // Lays params_ and buffers_ out for layers_ (the one alignment rule); a tied weight takes the
  // named layer's tensor (checked before: check_ties()).
  void lay_out_arenas();
  // ConfigError unless every tie_to names an earlier embedding whose table has the weight's shape;
  // where(name): the layer's place in the config.
  // ConfigError (at `where` of the layer) when a layer that reads a sequence as rows (positions,
  // features) (a SequenceLayer: lstm, gru, multi_head_attention) is fed an embedding's channels-first output
  // (features, positions): the shapes agree, the meaning does not.
  void check_row_inputs(const std::function<std::string(const std::string&)>& where) const;
  void check_ties(const std::function<std::string(const std::string&)>& where) const;
  int index_of(const std::string& name) const;  // -1: no such layer

  Shape input_;
  InitScheme init_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<std::vector<int>> inputs_;
  std::vector<TensorSlot> params_, buffers_;
  std::vector<std::vector<int>> layer_params_;
  int64_t param_floats_ = 0, buffer_floats_ = 0;
};

}  // namespace trainer
