// Graph models: named inputs, the graph's validation, blocks, and gradients through fan-out.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "kernels/cpu/cpu_backend.h"
#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/model/executor.h"
#include "lib/train/fit.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;

namespace {

// A config around `layers` (YAML list items, one per line, indented by 4) and optional blocks.
std::string config(const std::string& layers, const std::string& blocks = "",
                   const std::string& shape = "[4]") {
  return "model:\n  input_shape: " + shape + "\n" + (blocks.empty() ? "" : "  blocks:\n" + blocks) +
         "  layers:\n" + layers + "data: {train: {format: random}, num_classes: 3}\n";
}

Model model_of(const std::string& yaml) {
  Config c = parse_config(yaml, "graph.yaml", {});
  return Model(c.input_shape, c.layers, c.init, c.file, c.blocks);
}

std::string model_error(const std::string& yaml) {
  try {
    model_of(yaml);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a layer without inputs takes the previous layer's output, so a list is a stack", "[graph]") {
  Model m =
      model_of(config("    - {type: dense, units: 5}\n    - {type: relu}\n    - {type: dense, units: 3}\n"));
  REQUIRE(m.layers().size() == 3);
  CHECK(m.layer_inputs(0) == std::vector<int>{-1});
  CHECK(m.layer_inputs(1) == std::vector<int>{0});
  CHECK(m.layer_inputs(2) == std::vector<int>{1});
  CHECK_THAT(m.summary(), Contains("Connected to") && Contains("relu_1") && Contains("dense_1"));
  // The resolved layers leave the default implicit: a stack stays a plain list.
  CHECK_FALSE(m.describe_layers()[1]["inputs"]);
}

TEST_CASE("named inputs make a graph, run in a topological order whatever the declaration order", "[graph]") {
  // `late` is declared before the layer it reads: the model runs it after.
  Model m =
      model_of(config("    - {type: dense, units: 5, name: a}\n"
                      "    - {type: dense, units: 5, name: late, inputs: [b]}\n"
                      "    - {type: dense, units: 5, name: b, inputs: [a]}\n"
                      "    - {type: add, name: sum, inputs: [late, b, input_proj]}\n"
                      "    - {type: dense, units: 5, name: input_proj, inputs: [input]}\n"
                      "    - {type: concat, name: cat, inputs: [sum, a]}\n"
                      "    - {type: dense, units: 3, name: out}\n"));
  std::vector<std::string> order;
  for (const auto& l : m.layers()) order.push_back(l->name());
  CHECK(order == std::vector<std::string>{"a", "b", "late", "input_proj", "sum", "cat", "out"});
  CHECK(m.layers()[5]->output_shape().str() == Shape{10}.str());
  CHECK_THAT(m.summary(), Contains("late, b, input_proj"));
  CHECK(m.describe_layers()[4]["inputs"][0].as<std::string>() == "late");
}

TEST_CASE("the graph's errors name the layers: cycle, unknown input, unused output, shapes at add",
          "[graph]") {
  CHECK_THAT(model_error(config("    - {type: dense, units: 4, name: a, inputs: [b]}\n"
                                "    - {type: dense, units: 4, name: b, inputs: [a]}\n"
                                "    - {type: add, inputs: [a, input]}\n")),
             Contains("graph.yaml:") && Contains("form a cycle") && Contains("b -> a -> b"));
  CHECK_THAT(model_error(config("    - {type: dense, units: 4, name: a}\n"
                                "    - {type: add, inputs: [a, inptu]}\n")),
             Contains("graph.yaml:5:") && Contains("model.layers.1.inputs") &&
                 Contains("unknown input 'inptu'") && Contains("did you mean 'input'"));
  CHECK_THAT(model_error(config("    - {type: dense, units: 4, name: a}\n"
                                "    - {type: dense, units: 4, name: unused}\n"
                                "    - {type: dense, units: 3, inputs: [a]}\n")),
             Contains("model.layers.1") && Contains("output of layer 'unused' (dense) is not used"));
  CHECK_THAT(
      model_error(config("    - {type: dense, units: 5, name: a}\n"
                         "    - {type: add, name: sum, inputs: [a, input]}\n")),
      Contains("add 'sum'") && Contains("same shape") && Contains("(None, 5)") && Contains("(None, 4)"));
  CHECK_THAT(model_error(config("    - {type: dense, units: 5, inputs: [input, input]}\n")),
             Contains("takes 1 input, got 2"));
  CHECK_THAT(model_error(config("    - {type: add, inputs: [input]}\n")),
             Contains("takes 2 or more inputs, got 1"));
  CHECK_THAT(model_error(config("    - {type: dense, units: 3, name: input}\n")),
             Contains("the name 'input' is reserved"));
  CHECK_THAT(
      model_error(config("    - {type: conv2d, filters: 4, kernel_size: 1, name: c}\n"
                         "    - {type: maxpool2d, pool_size: 2, name: p}\n"
                         "    - {type: concat, inputs: [c, p]}\n",
                         "", "[2, 4, 4]")),
      Contains("every other axis must match") && Contains("(None, 4, 4, 4)") && Contains("(None, 4, 2, 2)"));
}

TEST_CASE("blocks expand with their parameters, PyTorch-style names and the block's input",
          "[graph][blocks]") {
  const std::string blocks =
      "    res:\n"
      "      params: {units: ~, scale: 1}\n"
      "      layers:\n"
      "        - {type: dense, name: fc, units: $units}\n"
      "        - {type: tanh}\n"
      "        - {type: add, name: add, inputs: [tanh_1, input]}\n";
  Model m =
      model_of(config("    - {type: res, name: layer1.0, units: 4}\n"
                      "    - {type: res, units: 4}\n"
                      "    - {type: dense, name: fc, units: 3}\n",
                      blocks));
  std::vector<std::string> names;
  for (const auto& l : m.layers()) names.push_back(l->name());
  CHECK(names == std::vector<std::string>{"layer1.0.fc", "layer1.0.tanh_1", "layer1.0.add", "res_1.fc",
                                          "res_1.tanh_1", "res_1.add", "fc"});
  CHECK(m.layer_inputs(2) == std::vector<int>{1, -1});  // the first use's input is the model's
  CHECK(m.layer_inputs(3) == std::vector<int>{2});
  CHECK(m.layer_inputs(5) == std::vector<int>{4, 2});
  CHECK(m.params()[0].name == "layer1.0.fc.weight");
  CHECK_THAT(model_error(config("    - {type: res}\n", blocks)), Contains("needs 'units'"));
  CHECK_THAT(model_error(config("    - {type: res, units: 4, unit: 3}\n", blocks)),
             Contains("unknown key 'model.layers.0.unit'") && Contains("units") && Contains("scale"));
  // A layer of a block is located in the block's definition, $params or not.
  CHECK_THAT(
      model_error(config("    - {type: res, units: 4, name: x}\n    - {type: dense, units: 2, name: x.fc}\n",
                         blocks)),
      Contains("duplicate layer name 'x.fc'"));
  CHECK_THAT(model_error(config("    - {type: bad}\n",
                                "    bad:\n      params: {units: 3}\n      layers:\n"
                                "        - {type: dense, name: spare, units: $units}\n"
                                "        - {type: dense, units: 2, inputs: [input]}\n")),
             Contains("graph.yaml:7:") && Contains("model.blocks.bad.layers.0") &&
                 Contains("'bad_1.spare' (dense) is not used"));
  // Layers inside blocks do not move the default names of the others.
  CHECK(model_of(config("    - {type: res, units: 4}\n    - {type: dense, units: 3}\n", blocks))
            .layers()
            .back()
            ->name() == "dense_1");
  CHECK_THAT(model_error(config("    - {type: rse, units: 4}\n", blocks)),
             Contains("unknown layer type or block 'rse'") && Contains("did you mean 'res'"));
  CHECK_THAT(model_error(config("    - {type: loop}\n", "    loop:\n      layers: [{type: loop}]\n")),
             Contains("uses itself"));
  // Blocks of blocks multiply: 8^6 layers are refused before any is expanded.
  std::string nested;
  for (int level = 1; level <= 6; ++level) {
    const std::string inner = level < 6 ? "b" + std::to_string(level + 1) : "relu";
    nested += "    b" + std::to_string(level) + ":\n      layers: [";
    for (int k = 0; k < 8; ++k) nested += std::string(k ? ", " : "") + "{type: " + inner + "}";
    nested += "]\n";
  }
  CHECK_THAT(model_error(config("    - {type: b1}\n    - {type: dense, units: 2}\n", nested)),
             Contains("model.blocks.b1: the model would have more than 4096 layers"));
  CHECK_THAT(
      model_error(config("    - {type: dense, units: 2}\n", "    dense:\n      layers: [{type: relu}]\n")),
      Contains("'dense' is a layer type"));
  CHECK_THAT(
      model_error(config("    - {type: b}\n", "    b:\n      layers: [{type: dense, units: $width}]\n")),
      Contains("unknown block parameter '$width'"));
}

namespace {

// d(loss)/d(parameter) from the executor against central differences of the loss: the number of
// parameters outside 2e-3 + 2e-2 |numeric| (the first three described in *first), and how many
// were checked.
// ids: the input batch (token ids for an embedding); empty: random values.
size_t bad_gradients(Model& m, const Shape& input, int64_t batch, size_t* checked, std::string* first,
                     const std::vector<float>& ids = {}) {
  CpuBackend backend;
  OptimizerConfig oc;
  Optimizer opt(oc);
  Executor ex(m, backend, opt, test::classifier_options({batch}, 3));
  std::vector<float> params(size_t(m.param_arena_floats()), 0.f), buffers(1, 0.f);
  m.initialize(params.data(), buffers.data(), 7);
  const std::vector<float> x = ids.empty() ? test::random_vector(size_t(batch * input.numel()), 11) : ids;
  std::vector<int32_t> y;
  for (int64_t i = 0; i < batch; ++i) y.push_back(int32_t((i * 2) % 3));

  std::vector<float> analytic(params.size());
  ex.set_gradient_hook([&](float* g) { std::copy(g, g + analytic.size(), analytic.begin()); });
  ex.upload_params(params.data(), buffers.data());
  ex.train_step(batch, x.data(), y.data(), 1, 0.f);  // lr 0: the weights stay
  auto loss = [&](const std::vector<float>& p) {
    ex.upload_params(p.data(), buffers.data());
    ex.reset_metrics();
    ex.eval_step(batch, x.data(), y.data());
    return ex.read_metrics().loss_sum / double(batch);  // the step's gradient is of the mean loss
  };
  const float h = 1e-2f;
  size_t bad = 0;
  *checked = 0;
  std::ostringstream out;
  for (const TensorSlot& s : m.params())
    for (int64_t i = 0; i < s.shape.numel(); ++i) {
      const size_t at = size_t(s.offset + i);
      std::vector<float> p = params;
      p[at] = params[at] + h;
      const double up = loss(p);
      p[at] = params[at] - h;
      const double down = loss(p);
      const double numeric = (up - down) / (2.0 * double(h));
      ++*checked;
      if (!(std::abs(analytic[at] - numeric) <= 2e-3 + 2e-2 * std::abs(numeric)) && bad++ < 3)
        out << " " << s.name << "[" << i << "] analytic " << analytic[at] << " numeric " << numeric << ";";
    }
  *first = out.str();
  return bad;
}

// bad_gradients(), checked: no gradient outside the bound (the first few named); returns how many
// were compared.
size_t check_gradients(Model& m, const Shape& input, int64_t batch, const std::vector<float>& ids = {}) {
  size_t checked = 0;
  std::string first;
  const size_t bad = bad_gradients(m, input, batch, &checked, &first, ids);
  INFO(bad << " of " << checked << " parameter gradients outside 2e-3 + 2e-2 |numeric|:" << first);
  CHECK(bad == 0);
  return checked;
}

}  // namespace

// A graph where one tensor (t) has four consumers: two dense layers (their gradients go through
// the scratch gradient and Backend::accumulate), add and concat (which add into the gradient
// themselves).
TEST_CASE("gradients of a tensor with several consumers are summed (finite differences)",
          "[graph][gradients]") {
  Model m =
      model_of(config("    - {type: dense, units: 5, name: a}\n"
                      "    - {type: tanh, name: t}\n"
                      "    - {type: dense, units: 5, name: b, inputs: [t]}\n"
                      "    - {type: dense, units: 5, name: c, inputs: [t]}\n"
                      "    - {type: add, name: s, inputs: [b, c, t]}\n"
                      "    - {type: concat, name: cat, inputs: [s, t]}\n"
                      "    - {type: flatten, name: view}\n"
                      "    - {type: dense, units: 3, name: out}\n"));
  const size_t checked = check_gradients(m, Shape{4}, 4);
  CHECK(checked > 100);
}

// Stacked recurrent layers in one model: a bidirectional lstm's every-position output feeds a
// gru whose last state feeds the classifier; the whole model's parameter gradients (through both
// directions, the stacking and the dense layer) against finite differences.
TEST_CASE("stacked lstm and gru layers train end to end (finite differences)", "[graph][gradients]") {
  Model m =
      model_of(config("    - {type: lstm, units: 3, return_sequences: true, bidirectional: true}\n"
                      "    - {type: gru, units: 4}\n"
                      "    - {type: dense, units: 3}\n",
                      "", "[5, 2]"));
  CHECK(m.num_params() == 2 * (4 * 3 * (2 + 3) + 8 * 3) + (3 * 4 * (6 + 4) + 6 * 4) + (4 * 3 + 3));
  const size_t checked = check_gradients(m, Shape{5, 2}, 3);
  CHECK(checked == size_t(m.num_params()));
}

// The same through a mask: the token ids (the model's input) are the layers' second input, and
// the positions whose id is 0 are skipped (front, back and inner padding below). Every parameter
// gradient, the embedding's table included, against finite differences.
TEST_CASE("lstm and gru masked by the token ids train end to end (finite differences)",
          "[graph][gradients]") {
  Model m =
      model_of(config("    - {type: embedding, input_dim: 9, output_dim: 3, channels_first: false}\n"
                      "    - {type: lstm, units: 3, return_sequences: true, bidirectional: true,"
                      " inputs: [embedding_1, input]}\n"
                      "    - {type: gru, units: 2, inputs: [lstm_1, input]}\n"
                      "    - {type: dense, units: 3}\n",
                      "", "[6]"));
  const std::vector<float> ids = {0, 0, 3, 5, 1, 8, 2, 7, 4, 0, 0, 0, 6, 0, 2, 0, 5, 3};  // 3 samples
  const size_t checked = check_gradients(m, Shape{6}, 3, ids);
  CHECK(checked == size_t(m.num_params()));
}

// Causal attention with the key-padding mask: front-padded rows leave the first queries no key
// (their weights are 0); every parameter gradient against finite differences.
TEST_CASE("causal attention masked by the token ids trains end to end (finite differences)",
          "[graph][gradients]") {
  Model m = model_of(
      config("    - {type: embedding, input_dim: 9, output_dim: 4, channels_first: false}\n"
             "    - {type: multi_head_attention, heads: 2, causal: true, inputs: [embedding_1, input]}\n"
             "    - {type: global_avg_pool, channels_last: true}\n"
             "    - {type: dense, units: 3}\n",
             "", "[5]"));
  const std::vector<float> ids = {0, 0, 3, 5, 1, 2, 7, 0, 4, 8, 0, 6, 0, 2, 0};  // 3 samples
  const size_t checked = check_gradients(m, Shape{5}, 3, ids);
  CHECK(checked == size_t(m.num_params()));
}

namespace {

// The model's output for token ids x (batch rows), parameters from init seed 7.
std::vector<float> predict_ids(Model& m, int64_t batch, const std::vector<float>& x) {
  CpuBackend backend;
  OptimizerConfig oc;
  Optimizer opt(oc);
  Executor ex(m, backend, opt, test::classifier_options({batch}, 3));
  std::vector<float> params(size_t(m.param_arena_floats()), 0.f), buffers(1, 0.f);
  m.initialize(params.data(), buffers.data(), 7);
  ex.upload_params(params.data(), buffers.data());
  std::vector<float> out(size_t(batch * m.output_shape().numel()));
  ex.predict(batch, x.data(), out.data());
  return out;
}

}  // namespace

// Masking is packing: with its front padding skipped, a sequence gives the state that its real
// tokens alone give (PyTorch's pack_padded_sequence), in both directions, for lstm and gru.
TEST_CASE("a masked recurrent layer over front padding equals the layer over the real tokens alone",
          "[graph]") {
  for (const char* cell : {"lstm", "gru"}) {
    const std::string layers =
        std::string("    - {type: embedding, input_dim: 9, output_dim: 3, channels_first: false}\n") +
        "    - {type: " + cell + ", units: 4, bidirectional: true%s}\n" + "    - {type: dense, units: 3}\n";
    const auto with = [&](const std::string& extra, const std::string& shape) {
      std::string l = layers;
      l.replace(l.find("%s"), 2, extra);
      return model_of(config(l, "", shape));
    };
    Model padded = with(", inputs: [embedding_1, input]", "[7]"), plain = with("", "[4]");
    const std::vector<float> front = {0, 0, 0, 5, 1, 8, 2, 0, 0, 0, 7, 4, 6, 3},  // 2 samples, 3 pads each
        tokens = {5, 1, 8, 2, 7, 4, 6, 3};
    const std::vector<float> a = predict_ids(padded, 2, front), b = predict_ids(plain, 2, tokens);
    INFO(cell);
    REQUIRE(a.size() == b.size());
    for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).epsilon(1e-6).margin(1e-7));
  }
}

// An embedding's default output is channels-first (features, positions), for conv1d; a layer that
// reads rows (positions, features) would take the features for positions without an error.
TEST_CASE("a recurrent layer or attention fed a channels-first embedding is a config error", "[graph]") {
  for (const char* layer : {"{type: lstm, units: 4}", "{type: gru, units: 4, return_sequences: true}",
                            "{type: multi_head_attention, heads: 2}"}) {
    const std::string yaml =
        config(std::string("    - {type: embedding, input_dim: 20, output_dim: 6}\n    - ") + layer +
               "\n    - {type: flatten}\n    - {type: dense, units: 3}\n");
    CHECK_THAT(model_error(yaml), Contains("graph.yaml:") && Contains("reads a sequence as rows") &&
                                      Contains("'embedding_1' gives (6, 4)") &&
                                      Contains("set channels_first: false on 'embedding_1'"));
    std::string fixed = yaml;
    fixed.replace(fixed.find("output_dim: 6}"), 14, "output_dim: 6, channels_first: false}");
    CHECK(model_error(fixed).empty());
  }
}

// tie_to: the output layer reads the embedding's table. The model keeps it once (the summary, the
// arena, the checkpoint names), its gradient is the sum of both uses (the dense layer's backward
// writes it, the embedding's adds), and the errors name the key and what is allowed.
TEST_CASE("a dense layer tied to an embedding shares its table and sums both gradients",
          "[graph][gradients][tie]") {
  const std::string layers =
      "    - {type: embedding, name: wte, input_dim: 5, output_dim: 4, channels_first: false}\n"  // (3, 4)
      "    - {type: tanh, name: t}\n"
      "    - {type: dense, units: 5, per_position: true, name: head, tie_to: wte}\n"  // (3, 5)
      "    - {type: flatten}\n"
      "    - {type: dense, units: 3, name: out}\n";
  Model m = model_of(config(layers, "", "[3]"));
  REQUIRE(m.params().size() == 4);  // wte.weight, head.bias, out.weight, out.bias
  CHECK(m.params()[0].name == "wte.weight");
  CHECK(m.params()[0].shared_with == std::vector<int>{2});
  CHECK(m.params()[1].name == "head.bias");
  CHECK(m.layer_params(2) == std::vector<int>{0, 1});
  CHECK(m.layer_num_params(2) == 5);
  CHECK(m.num_params() == 5 * 4 + 5 + 3 * 15 + 3);
  CHECK_THAT(m.summary(), Contains("Trainable params: 73"));
  // Ids 0..4 in every position, each batch row different.
  std::vector<float> ids;
  for (int i = 0; i < 4 * 3; ++i) ids.push_back(float((i * 3 + 1) % 5));
  const size_t checked = check_gradients(m, Shape{3}, 4, ids);
  CHECK(checked == 73);

  const auto tied = [&](const std::string& head) {
    return model_error(
        config("    - {type: embedding, name: wte, input_dim: 5, output_dim: 4, channels_first: false}\n"
               "    - {type: conv1d, name: c, filters: 4, kernel_size: 1}\n" +
                   head + "    - {type: flatten}\n",
               "", "[3]"));
  };
  CHECK_THAT(tied("    - {type: dense, units: 5, per_position: true, tie_to: nowhere}\n"),
             Contains("graph.yaml:") && Contains("tie_to: no layer is named 'nowhere'"));
  CHECK_THAT(tied("    - {type: dense, units: 4, per_position: true, tie_to: c}\n"),
             Contains("'c' is a conv1d layer; a weight can be tied only to an embedding's table"));
  CHECK_THAT(tied("    - {type: dense, units: 6, per_position: true, tie_to: wte}\n"),
             Contains("'wte''s table is (5, 4)") && Contains("set units: 5"));
  // Two readers: the second's backward would overwrite the first's share of the gradient.
  CHECK_THAT(tied("    - {type: dense, units: 5, per_position: true, name: h1, tie_to: wte}\n"
                  "    - {type: dense, units: 5, per_position: true, name: h2, inputs: [c], tie_to: wte}\n"
                  "    - {type: add, inputs: [h1, h2]}\n"),
             Contains("'wte''s table is read already by 'h1' (tie_to); one layer may share"));
  CHECK_THAT(model_error(config(
                 "    - {type: dense, units: 5, name: head, tie_to: wte}\n"
                 "    - {type: embedding, name: wte, input_dim: 5, output_dim: 4, channels_first: false}\n"
                 "    - {type: flatten}\n",
                 "", "[4]")),
             Contains("'wte' runs after 'head'"));
}

// The activation gradients share memory by lifetime (executor.cc): a long chain with a residual
// branch, views, layer norms and a convolution still gets every parameter's gradient right, and
// its gradients take less memory than a place each.
TEST_CASE("activation gradients that share memory by lifetime still give exact gradients",
          "[graph][gradients][memory]") {
  Model m =
      model_of(config("    - {type: conv1d, filters: 4, kernel_size: 3, padding: same, name: c1}\n"
                      "    - {type: sigmoid, name: r1}\n"
                      "    - {type: layer_norm, name: n1}\n"
                      "    - {type: conv1d, filters: 4, kernel_size: 3, padding: same, name: c2}\n"
                      "    - {type: gelu, approximate: tanh, name: g2}\n"
                      "    - {type: add, name: res, inputs: [g2, n1]}\n"
                      "    - {type: identity, name: same}\n"
                      "    - {type: rms_norm, name: n2}\n"
                      "    - {type: flatten, name: flat}\n"
                      "    - {type: dense, units: 6, name: d1}\n"
                      "    - {type: tanh, name: t1}\n"
                      "    - {type: dense, units: 6, name: d2}\n"
                      "    - {type: sigmoid, name: s2}\n"
                      "    - {type: dense, units: 3, name: out}\n",
                      "", "[2, 5]"));
  const size_t checked = check_gradients(m, Shape{2, 5}, 3);
  CHECK(checked > 200);

  CpuBackend backend;
  OptimizerConfig oc;
  Optimizer opt(oc);
  Executor ex(m, backend, opt, test::classifier_options({64}, 3));
  bool shared = false;
  for (const auto& row : ex.memory_breakdown()) {
    INFO(row.first << ": " << row.second);
    if (row.first.find("activation gradients (shared by lifetime") != std::string::npos) shared = true;
  }
  CHECK(shared);
}

TEST_CASE("trainer summary of resnet18_cifar prints PyTorch's 11,173,962 parameters and Keras' total",
          "[graph][cli]") {
  auto r = test::run_trainer("summary " + std::string(TRAINER_SOURCE_DIR) + "/configs/resnet18_cifar.yaml");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  // 20 batchnorms over 4,800 channels in all (64 + 4 x 64 + 5 x 128 + 5 x 256 + 5 x 512), each with
  // a running mean and variance: 9,600 non-trainable. Total = trainable + non-trainable, as Keras.
  CHECK_THAT(r.out, Contains("Trainable params: 11,173,962") && Contains("Non-trainable params: 9,600") &&
                        Contains("Total params: 11,183,562") && Contains("layer2.0.downsample.0") &&
                        Contains("layer1.0.bn2, relu"));
  // A batchnorm's Param # counts its statistics too (Keras: 4 x 64 for 64 channels).
  // Checked on its line, word by word (a std::regex over the whole summary recursed once per
  // character and overflowed the stack under ASan).
  std::istringstream lines(r.out);
  std::vector<std::string> row;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> w{std::istream_iterator<std::string>(words),
                               std::istream_iterator<std::string>()};
    if (!w.empty() && w[0] == "layer1.0.bn1") row = w;
  }
  if (row.size() > 7) row.resize(7);  // then "Connected to"
  CHECK(row == std::vector<std::string>{"layer1.0.bn1", "batchnorm", "(None,", "64,", "32,", "32)", "256"});
}

// The replicas of one process (--device gpu:0,1) are threads that each build the model from the
// same Config at once; block expansion adds nodes to the YAML document's memory, which yaml-cpp
// does not lock. Without the reader's lock this crashed about one start in two (vgg11_bn_cifar,
// 2 GPUs) and crashes here within a few rounds.
TEST_CASE("threads build models with blocks from one Config at once, as replicas do", "[graph][threads]") {
  const Config c = load_config(std::string(TRAINER_SOURCE_DIR) + "/configs/resnet18_cifar.yaml",
                               {"data.train={format: random}"});
  std::vector<int64_t> params(4, 0);
  for (int round = 0; round < 20; ++round) {
    std::vector<std::thread> threads;
    for (size_t t = 0; t < params.size(); ++t)
      threads.emplace_back(
          [&, t] { params[t] = Model(c.input_shape, c.layers, c.init, c.file, c.blocks).num_params(); });
    for (auto& th : threads) th.join();
    for (int64_t n : params) REQUIRE(n == 11173962);
  }
}

TEST_CASE("a residual network learns Fashion-MNIST on a subset", "[graph][fit][e2e]") {
  if (!std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"))
    FAIL("Fashion-MNIST is missing: install dataset-fashion-mnist (scripts/setup.sh does)");
  Config cfg = load_config(std::string(TRAINER_SOURCE_DIR) + "/configs/resnet_fashion_mnist.yaml",
                           // The config's recipe, augmentation included (random crops and flips): 120
                           // steps; 40 were too few for the crops (0.22 at the end, 0.78 after 160).
                           {"train.epochs=3", "data.train.limit=2000", "data.validation.limit=500",
                            "data.batch_size=50", "device=cpu"});
  FitOptions fo;
  fo.out_dir = test::temp_dir("resnet_fmnist") + "/run";
  std::ostringstream out;
  FitResult r = fit(cfg, fo, out);
  INFO(out.str());
  REQUIRE(r.epochs_run == 3);
  CHECK(r.final_val_accuracy > 0.6);  // chance is 0.10; 0.76 here
}

TEST_CASE("trainer summary --json gives the expanded graph with checkpoint names and hyper-parameters",
          "[graph][cli]") {
  auto r = test::run_trainer("summary " + std::string(TRAINER_SOURCE_DIR) +
                             "/configs/resnet_fashion_mnist.yaml --json");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("trainable_params") == 170298);
  CHECK(j.at("input_shape") == nlohmann::json({1, 28, 28}));
  const auto& layers = j.at("layers");
  REQUIRE(layers.size() == 44);
  int64_t counted = 0, buffers = 0;
  for (const auto& l : layers) {
    for (const auto& p : l.at("params")) {
      int64_t n = 1;
      for (const auto& d : p.at("shape")) n *= d.get<int64_t>();
      counted += n;
    }
    for (const auto& b : l.at("buffers")) buffers += b.at("shape").at(0).get<int64_t>();
  }
  CHECK(counted == 170298);
  // Keras' total: trainable + non-trainable (the batchnorm running means and variances).
  CHECK(buffers > 0);
  CHECK(j.at("non_trainable_params") == buffers);
  CHECK(j.at("total_params") == 170298 + buffers);
  // layer2.0's projection shortcut reads the block's input; its add reads both branches.
  bool found_add = false;
  for (const auto& l : layers) {
    if (l.at("name") == "layer2.0.downsample.0") {
      CHECK(l.at("inputs") == nlohmann::json({"layer1.0.relu2"}));
      CHECK(l.at("hyper").at("strides") == nlohmann::json({2, 2}));
      CHECK(l.at("params").at(0).at("name") == "layer2.0.downsample.0.weight");
      CHECK(l.at("params").at(0).at("shape") == nlohmann::json({32, 16, 1, 1}));
    }
    if (l.at("name") == "layer2.0.add") {
      found_add = true;
      CHECK(l.at("inputs") == nlohmann::json({"layer2.0.bn2", "layer2.0.downsample.1"}));
    }
  }
  CHECK(found_add);
  CHECK(j.at("config").at("data").at("augment").at("crop_padding") == 2);
  CHECK(j.at("config").at("optimizer").at("nesterov") == true);
}

// GPT-2 small as GPT-2 is: lm_head reads wte's table (tie_to), so the model has 124,439,808
// parameters, GPT-2's count, and the summary names the one tensor under the embedding's name.
TEST_CASE("trainer summary of gpt2_small counts GPT-2's 124,439,808 parameters, the tied table once",
          "[graph][cli][tie]") {
  const std::string config = std::string(TRAINER_SOURCE_DIR) + "/configs/gpt2_small.yaml";
  auto r = test::run_trainer("summary " + config);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("Total params: 124,439,808"));
  auto j = test::run_trainer("summary " + config + " --json");
  REQUIRE(j.exit_code == 0);
  const auto s = nlohmann::json::parse(j.out);
  CHECK(s.at("trainable_params") == 124439808);
  bool found = false;
  for (const auto& l : s.at("layers")) {
    if (l.at("name") != "lm_head") continue;
    found = true;
    CHECK(l.at("hyper").at("tie_to") == "transformer.wte");
    REQUIRE(l.at("params").size() == 1);
    CHECK(l.at("params").at(0).at("name") == "transformer.wte.weight");
    CHECK(l.at("params").at(0).at("shape") == nlohmann::json({50257, 768}));
  }
  CHECK(found);
}
