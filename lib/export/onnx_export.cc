#include "lib/export/onnx_export.h"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "lib/checkpoint/atomic_file.h"
#include "lib/core/error.h"
#include "lib/export/onnx_graph.h"
#include "lib/export/onnx_inputs.h"
#include "lib/export/onnx_layers.h"
#include "lib/train/progress.h"
#include "lib/train/session.h"
#include "trainer_version.h"

namespace trainer {
namespace {

constexpr size_t kMaxProtobufBytes = (size_t(1) << 31) - 1;  // protobuf's limit on one message

std::vector<onnx::Dim> batched(const Shape& s) {
  std::vector<onnx::Dim> dims{onnx::Dim{0, "N"}};
  for (int64_t d : s.dims) dims.push_back(onnx::Dim{d, ""});
  return dims;
}

// The tensors of layer i in the host arenas, by spec name.
onnx::LayerTensors layer_tensors(const Model& model, const HostWeights& w, int i) {
  onnx::LayerTensors t;
  // A tied weight is its owner's tensor: one initializer under the owner's name.
  for (int k : model.layer_params(size_t(i))) {
    const TensorSlot& s = model.params()[size_t(k)];
    t.by_name[s.spec.name] = {s.shape, w.params.data() + s.offset, s.name};
  }
  for (const TensorSlot& s : model.buffers())
    if (s.layer == i)
      t.by_name[s.name.substr(s.name.rfind('.') + 1)] = {s.shape, w.buffers.data() + s.offset, s.name};
  return t;
}

// What predict writes, from the network's output: the node's op, or "" when predict writes the
// output itself (regression values).
const char* probabilities_op(const Config& cfg) {
  const LossConfig& loss = cfg.loss_config;
  if (loss.on_values()) return loss.formula == ValueLoss::bce_logits ? "Sigmoid" : "";
  switch (loss.scores) {
    case ClassScores::log_probabilities:
      return "Exp";
    case ClassScores::probabilities:
      return "Identity";
    case ClassScores::logits:
      return "Softmax";
  }
  return "";
}

// "(N, 1, 28, 28)"
std::string with_batch(const Shape& s) { return "(N" + s.batched_str().substr(5); }

std::string input_description(const Config& cfg, const std::vector<std::string>& notes) {
  std::string text = "float32 " + with_batch(cfg.input_shape) +
                     ": one sample per row as the data stores it, before normalization";
  if (notes.empty()) return text + "; the graph applies no preprocessing";
  text += "; the graph applies: ";
  for (size_t k = 0; k < notes.size(); ++k) text += (k ? "; " : "") + notes[k];
  return text;
}

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / (1 << 20));
  return buf;
}

}  // namespace

onnx::Model onnx_model(const Config& cfg, const Model& model, const HostWeights& w,
                       std::vector<std::string>* notes) {
  std::vector<std::string> steps;
  onnx::Model m;
  m.producer_name = "trainer";
  m.producer_version = TRAINER_VERSION;
  m.opsets = {{"", kOnnxOpset}};
  onnx::Graph& g = m.graph;
  g.name = std::filesystem::path(cfg.file).parent_path().filename().string();
  if (g.name.empty()) g.name = "trainer";
  onnx::GraphBuilder b(g);

  // The graph's own names first: a layer named "output" gets "output_2".
  const std::string input = b.unique("input");
  b.unique("output");
  b.unique("probabilities");
  b.unique("values");
  const std::string first = onnx::add_input_preprocessing(b, cfg, input, &steps);
  std::vector<std::string> value(model.layers().size());  // each layer's output value
  for (size_t i = 0; i < model.layers().size(); ++i) {
    const Layer& layer = *model.layers()[i];
    std::vector<std::string> inputs;
    for (int from : model.layer_inputs(i)) inputs.push_back(from < 0 ? first : value[size_t(from)]);
    value[i] = onnx::export_layer(b, layer, layer_tensors(model, w, int(i)), inputs, layer.name());
  }
  g.nodes.push_back(onnx::Node{"Identity", "output", {value.back()}, {"output"}, {}, ""});

  const Shape& out_shape = model.output_shape();
  g.inputs.push_back(
      {input, onnx::DataType::float32, batched(cfg.input_shape), input_description(cfg, steps)});
  g.outputs.push_back({"output", onnx::DataType::float32, batched(out_shape),
                       "the network's output, as eval's loss takes it"});
  if (const std::string op = probabilities_op(cfg); !op.empty()) {
    std::vector<onnx::Attribute> attributes;
    if (op == "Softmax") attributes.push_back(onnx::Attribute::of_int("axis", -1));
    onnx::Node n{op, "probabilities", {"output"}, {"probabilities"}, attributes, ""};
    g.nodes.push_back(n);
    g.outputs.push_back({"probabilities", onnx::DataType::float32, batched(out_shape),
                         "what `trainer predict` writes: " + op + " of output"});
  }
  // data.normalize_targets: the network learned standardized targets; `values` is what predict
  // writes, output * std + mean per output (lib/train/target_scale.h).
  if (const TargetScale t = recorded_target_scale(cfg); t.on()) {
    const int64_t K = out_shape.numel();
    if (int64_t(t.mean.size()) != K)
      throw ConfigError(cfg.file + ": data.target_statistics has " + std::to_string(t.mean.size()) +
                        " values per statistic, the model " + std::to_string(K) + " outputs");
    std::vector<float> sd(t.std.begin(), t.std.end()), mean(t.mean.begin(), t.mean.end());
    const std::string scaled = b.node("Mul", {"output", b.floats("target.std", {K}, sd)}, "values.scaled");
    g.nodes.push_back(
        onnx::Node{"Add", "values", {scaled, b.floats("target.mean", {K}, mean)}, {"values"}, {}, ""});
    g.outputs.push_back({"values", onnx::DataType::float32, batched(out_shape),
                         "what `trainer predict` writes: output * data.target_statistics.std + mean"});
  }
  g.doc = "exported by trainer " + std::string(TRAINER_VERSION) + " from " + cfg.file;
  m.metadata.push_back({"trainer.class_names", nlohmann::json(cfg.data.class_names).dump()});
  m.metadata.push_back({"trainer.input", input_description(cfg, steps)});
  YAML::Emitter config;
  config << cfg.resolved;
  m.metadata.push_back({"trainer.config", config.c_str()});
  if (notes) *notes = steps;
  return m;
}

void export_file(const Config& cfg, const ExportOptions& o, std::ostream& out) {
  if (o.format != "onnx") throw UsageError("--format " + o.format + ": allowed: onnx");
  const std::string weights = resolve_weights(o.weights);  // paths before the model is built
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(o.out).parent_path();
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
    throw UsageError("--out " + o.out + ": the directory " + dir.string() + " does not exist");
  if (std::filesystem::is_directory(o.out, ec))
    throw UsageError("--out " + o.out + " is a directory; give the .onnx file to write");
  auto model = make_model(cfg);
  const HostWeights w = load_weights(weights, *model, "--weights");
  std::vector<std::string> notes;
  onnx::Model m = onnx_model(cfg, *model, w, &notes);
  m.metadata.push_back({"trainer.weights", weights});
  const std::string bytes = onnx::encode(m);
  if (bytes.size() > kMaxProtobufBytes)
    throw ConfigError(cfg.file + ": the model's ONNX file would be " + mib(bytes.size()) +
                      ", over protobuf's 2 GiB limit on one message (ONNX external data is not written)");
  write_file_atomic(o.out, bytes);
  for (const std::string& n : notes) spdlog::info("onnx input: {}", n);
  std::string outputs = "output";
  for (const onnx::ValueInfo& v : m.graph.outputs)
    if (v.name != "output") outputs += ", " + v.name;
  out << "[" << timestamp_now() << "] exported " << weights << " -> " << o.out << " (ONNX opset "
      << kOnnxOpset << ", " << m.graph.nodes.size() << " nodes, " << with_thousands(model->num_params())
      << " parameters, " << mib(bytes.size()) << "); input 'input' float32 " << with_batch(cfg.input_shape)
      << ", outputs: " << outputs << std::endl;
}

}  // namespace trainer
