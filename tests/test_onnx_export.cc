// trainer export --format onnx (lib/export/onnx_export.h): which layers translate, what the graph's
// first nodes (the data pipeline's normalization) and last nodes (predict's probabilities) are, and
// the command's errors. That ONNX Runtime computes what predict does is scripts/onnx_check.sh's
// part (ctest onnx_export).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>

#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/export/onnx_export.h"
#include "lib/export/onnx_layers.h"
#include "lib/registry/registry.h"
#include "lib/train/session.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;

namespace {

// A model of every arena filled with zeros: the graph's structure does not depend on the values.
struct Exported {
  onnx::Model model;
  std::vector<std::string> notes;
};

Exported export_yaml(const std::string& yaml) {
  const Config cfg = parse_config(yaml, "test.yaml", {});
  auto model = make_model(cfg);
  HostWeights w;
  w.params.assign(size_t(model->param_arena_floats()), 0.f);
  w.buffers.assign(size_t(model->buffer_arena_floats()), 1.f);
  Exported e;
  e.model = onnx_model(cfg, *model, w, &e.notes);
  return e;
}

const onnx::Tensor& initializer(const onnx::Graph& g, const std::string& name) {
  for (const onnx::Tensor& t : g.initializers)
    if (t.name == name) return t;
  FAIL("no initializer " << name);
  throw 0;
}

std::vector<float> floats_of(const onnx::Tensor& t) {
  std::vector<float> v(size_t(t.numel()));
  std::memcpy(v.data(), t.raw.data(), v.size() * sizeof(float));
  return v;
}

std::vector<std::string> op_types(const onnx::Graph& g) {
  std::vector<std::string> ops;
  for (const onnx::Node& n : g.nodes) ops.push_back(n.op_type);
  return ops;
}

const char* kConv = R"(model:
  input_shape: [2, 6, 6]
  layers:
    - {type: conv2d, name: conv, filters: 3, kernel_size: 3, padding: same}
    - {type: relu}
    - {type: global_avg_pool}
    - {type: dense, name: fc, units: 4}
loss: {type: sparse_categorical_crossentropy, from_logits: true}
data:
  train: {format: random, samples: 8}
  num_classes: 4
  normalize: {scale: 0.5, mean: [1, 2], std: [4, 8]}
)";

// A layer whose type no translation knows.
class Mystery : public Layer {
 protected:
  Shape infer(const Shape& in) override { return in; }
};

}  // namespace

TEST_CASE("every registered layer type has an ONNX translation", "[onnx]") {
  const std::vector<std::string> exportable = onnx::exportable_layer_types();
  for (const std::string& type : Registry::global().layer_types()) {
    if (!Registry::global().layer(type, "test").make) continue;  // a macro (mlp): expanded before
    INFO("layer type " << type);
    CHECK(std::find(exportable.begin(), exportable.end(), type) != exportable.end());
  }
}

TEST_CASE("a layer type without a translation is a config error naming the layer and the types that have one",
          "[onnx]") {
  onnx::Graph g;
  onnx::GraphBuilder b(g);
  Mystery layer;
  layer.set_identity("mystery", "block3.odd");
  layer.build(Shape{4}, 0);
  try {
    onnx::export_layer(b, layer, {}, {"input"}, "block3.odd");
    FAIL("no error");
  } catch (const ConfigError& e) {
    CHECK(e.code() == ExitCode::config);
    CHECK_THAT(e.what(), Contains("layer 'block3.odd' (type mystery) cannot be exported to ONNX"));
    CHECK_THAT(e.what(), Contains("types that have one: add, avgpool1d, avgpool2d, batchnorm"));
  }
}

TEST_CASE("the graph normalizes its raw input first, as the batch loader does, per channel", "[onnx]") {
  const Exported e = export_yaml(kConv);
  const onnx::Graph& g = e.model.graph;
  REQUIRE(g.nodes.size() >= 2);
  CHECK(g.nodes[0].op_type == "Mul");
  CHECK(g.nodes[0].inputs[0] == "input");
  CHECK(g.nodes[1].op_type == "Add");
  const onnx::Tensor& mul = initializer(g, "input.normalize.mul");
  CHECK(mul.dims == std::vector<int64_t>{2, 1, 1});  // broadcast over (N, C, H, W)
  CHECK(floats_of(mul) == std::vector<float>{0.5f / 4.f, 0.5f / 8.f});
  CHECK(floats_of(initializer(g, "input.normalize.add")) == std::vector<float>{-1.f / 4.f, -2.f / 8.f});
  CHECK(g.nodes[2].op_type == "Conv");
  CHECK(g.nodes[2].inputs[0] == "input.normalized");
  REQUIRE(e.notes.size() == 1);
  CHECK_THAT(e.notes[0], Contains("x * 0.5, then (x - mean) / std per channel"));
  // Geometry: `same` padding of a 3x3 kernel at stride 1 is one pixel on every side.
  for (const onnx::Attribute& a : g.nodes[2].attributes)
    if (a.name == "pads") CHECK(a.ints == std::vector<int64_t>{1, 1, 1, 1});
  // Names: values after the layers, initializers after the checkpoint's tensors.
  CHECK(initializer(g, "conv.weight").dims == std::vector<int64_t>{3, 2, 3, 3});
  CHECK(initializer(g, "fc.weight").dims == std::vector<int64_t>{4, 3});
}

TEST_CASE("the graph ends with the network's output and the probabilities predict writes", "[onnx]") {
  const Exported logits = export_yaml(kConv);
  const onnx::Graph& g = logits.model.graph;
  REQUIRE(g.outputs.size() == 2);
  CHECK(g.outputs[0].name == "output");
  CHECK(g.outputs[1].name == "probabilities");
  CHECK(g.outputs[1].dims[0].param == "N");
  CHECK(g.outputs[1].dims[1].value == 4);
  CHECK(g.nodes.back().op_type == "Softmax");
  CHECK(g.inputs[0].dims.size() == 4);
  CHECK(logits.model.opsets == std::vector<std::pair<std::string, int64_t>>{{"", 17}});

  std::string nll = kConv;
  nll.replace(nll.find("{type: sparse_categorical_crossentropy, from_logits: true}"), 58, "nll");
  nll.replace(nll.find("units: 4}"), 9, "units: 4}\n    - {type: log_softmax}");
  CHECK(export_yaml(nll).model.graph.nodes.back().op_type == "Exp");

  const char* regression = R"(model: {input_shape: [3], layers: [{type: dense, units: 2}]}
loss: mse
data: {train: {format: random, samples: 8}})";
  const onnx::Model r = export_yaml(regression).model;
  REQUIRE(r.graph.outputs.size() == 1);  // predict writes the values themselves
  CHECK(r.graph.outputs[0].name == "output");
  CHECK(op_types(r.graph) == std::vector<std::string>{"Gemm", "Identity"});  // nothing to normalize

  const char* binary = R"(model: {input_shape: [3], layers: [{type: dense, units: 1}]}
loss: binary_cross_entropy
data: {train: {format: random, samples: 8}})";
  CHECK(export_yaml(binary).model.graph.nodes.back().op_type == "Sigmoid");
}

TEST_CASE("a CSV source's recorded standardize statistics and fill values become the first nodes", "[onnx]") {
  const std::string csv = R"(model: {input_shape: [2], layers: [{type: dense, units: 2}]}
loss: {type: sparse_categorical_crossentropy, from_logits: true}
data:
  num_classes: 2
  train:
    format: csv
    path: unread.csv
    normalize: standardize
    columns: 3
    standardize: {mean: [10, -2], std: [4, 0.5]}
    missing: {fill: mean, values: [10, -2]}
)";
  const Exported e = export_yaml(csv);
  const onnx::Graph& g = e.model.graph;
  const std::vector<std::string> ops = op_types(g);
  REQUIRE(ops.size() >= 4);
  CHECK(std::vector<std::string>(ops.begin(), ops.begin() + 4) ==
        std::vector<std::string>{"IsNaN", "Where", "Sub", "Mul"});
  CHECK(floats_of(initializer(g, "input.fill")) == std::vector<float>{10.f, -2.f});
  CHECK(floats_of(initializer(g, "input.standardize.mean")) == std::vector<float>{10.f, -2.f});
  CHECK(floats_of(initializer(g, "input.standardize.inv_std")) == std::vector<float>{0.25f, 2.f});

  std::string categorical = csv;
  categorical += "    categories: {color: [blue, red]}\n";
  CHECK_THROWS_WITH(export_yaml(categorical), Contains("data.train has categorical columns"));
  std::string unrecorded = csv;
  unrecorded.replace(unrecorded.find("    standardize: {"),
                     unrecorded.find("    missing") - unrecorded.find("    standardize: {"), "");
  CHECK_THROWS_WITH(export_yaml(unrecorded), Contains("export the run directory"));
}

TEST_CASE("trainer export writes an ONNX file from a run directory; bad arguments are usage errors",
          "[onnx][cli]") {
  const std::string dir = test::temp_dir("onnx_export");
  const std::string cfg = test::write_file(dir, "disc.yaml", R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 8}, {type: relu}, {type: dropout, rate: 0.2}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: adam, lr: 0.01}
data: {train: {format: disc, samples: 64, seed: 1}, num_classes: 2, batch_size: 32}
train: {epochs: 1}
)");
  const std::string run = dir + "/run";
  REQUIRE(test::run_trainer("fit " + cfg + " -q --out " + run).exit_code == 0);
  const test::CommandResult r = test::run_trainer("export " + run + " --out " + dir + "/m.onnx");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("-> " + dir + "/m.onnx (ONNX opset 17"));
  CHECK_THAT(r.out, Contains("input 'input' float32 (N, 2), outputs: output, probabilities"));
  const std::string bytes = test::slurp(dir + "/m.onnx");
  REQUIRE(bytes.size() > 100);
  CHECK(bytes.substr(0, 2) == std::string("\x08\x08", 2));  // ir_version 8 comes first

  CHECK(test::run_trainer("export " + run + " --out " + dir + "/m.onnx --format tflite").exit_code == 2);
  CHECK(test::run_trainer("export " + run).exit_code == 2);  // --out is required
  const test::CommandResult no_dir = test::run_trainer("export " + run + " --out " + dir + "/missing/m.onnx");
  CHECK(no_dir.exit_code == 2);
  CHECK_THAT(no_dir.err, Contains("does not exist"));
  const test::CommandResult no_weights = test::run_trainer("export " + cfg + " --out " + dir + "/m.onnx");
  CHECK(no_weights.exit_code == 2);
  CHECK_THAT(no_weights.err, Contains("--weights is required with a config file"));
  CHECK(test::run_trainer("export " + cfg + " --weights " + run + " --out " + dir + "/c.onnx").exit_code ==
        0);
}
