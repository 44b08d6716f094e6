// The config schema: keys declared where layers, optimizers and data formats are registered and
// checked by one validator; the device spec (string or mapping, flags over the file); YAML merge
// keys.
#include <catch2/catch.hpp>

#include "lib/backend/backend_registry.h"
#include "lib/backend/device_spec.h"
#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/data/data_sources.h"
#include "lib/keys/key_spec.h"
#include "lib/model/model.h"
#include "lib/optim/optimizer.h"
#include "lib/registry/registry.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;
using Catch::StartsWith;

namespace {

const char* kBase = R"(model:
  input_shape: [1, 8, 8]
  layers:
    - {type: conv2d, filters: 2, kernel_size: 3}
    - {type: flatten}
    - {type: dense, units: 3}
optimizer: {type: sgd, lr: 0.1}
data:
  train: {format: random, samples: 50}
  num_classes: 3
  batch_size: 10
)";

Config parse(const std::string& text, std::vector<std::string> sets = {}) {
  return parse_config(text, "test.yaml", sets);
}

std::string names_of(const KeySpecs& keys, std::vector<std::string> extra) {
  for (const KeySpec& k : keys) extra.push_back(k.name);
  std::sort(extra.begin(), extra.end());
  std::string s;
  for (size_t i = 0; i < extra.size(); ++i) s += (i ? ", " : "") + extra[i];
  return s;
}

// A valid YAML value for a key, for the keys a test must give (the required ones).
std::string valid_value(const KeySpec& k) {
  switch (k.type) {
    case KeySpec::Type::integer:
    case KeySpec::Type::size:
    case KeySpec::Type::size_pair:
      return std::to_string(k.ilo > 0 ? k.ilo : 1);
    case KeySpec::Type::string_list:
      return "[x]";
    case KeySpec::Type::choice:
      return k.allowed.front();
    default:
      return "x";
  }
}

void require_documented(const KeySpecs& keys, const std::string& where) {
  for (const KeySpec& k : keys) {
    INFO(where << "." << k.name);
    CHECK(!k.doc.empty());
  }
}

}  // namespace

TEST_CASE("every layer type's keys are declared in the registry, and the validator allows exactly those",
          "[config][registry]") {
  const Registry& reg = Registry::global();
  for (const std::string& type : reg.layer_types()) {
    const LayerEntry& e = reg.layer(type, "test");
    require_documented(e.keys, type);
    // An undeclared key is rejected at its position, listing the declared ones (and type, name).
    std::string yaml = "{type: " + type + ", bogus_key: 1";
    for (const KeySpec& k : e.keys)
      if (!k.required.empty()) yaml += ", " + k.name + ": " + valid_value(k);
    yaml += "}";
    YAML::Node node = YAML::Load(yaml);
    NodeReader r(node, "model.layers.0", "layers.yaml");
    r.string("type", "");
    REQUIRE_THROWS_WITH(
        e.read(r),
        Contains("layers.yaml:1:") && Contains("unknown key 'model.layers.0.bogus_key'") &&
            Contains("allowed keys in 'model.layers.0': " + names_of(e.keys, {"inputs", "name", "type"})));
  }
}

TEST_CASE("mlp is a macro and the activation shortcut a trait of registry entries", "[config][registry]") {
  const Registry& reg = Registry::global();
  REQUIRE(reg.layer("mlp", "test").expand);
  REQUIRE_FALSE(reg.layer("mlp", "test").make);
  for (const char* t : {"dense", "conv1d", "conv2d"})
    REQUIRE(reg.layer(t, "test").traits.activation_shortcut);
  for (const char* t : {"flatten", "dropout", "maxpool2d", "relu"})
    REQUIRE_FALSE(reg.layer(t, "test").traits.activation_shortcut);
  REQUIRE(reg.activation_types() == std::vector<std::string>{"relu", "sigmoid", "tanh", "gelu", "leaky_relu",
                                                             "softmax", "log_softmax"});
  // What the model makes of them: an mlp of depth 3 and a dense with a leaky_relu shortcut.
  YAML::Node layers = YAML::Load(
      "[{type: mlp, depth: 3, width: 4, final_units: 5, name: m},"
      " {type: dense, units: 2, activation: leaky_relu}]");
  Model model(Shape{2}, layers, InitScheme::torch, "test.yaml");
  std::vector<std::string> names;
  for (const auto& l : model.layers()) names.push_back(l->name());
  REQUIRE(names == std::vector<std::string>{"m_dense_1", "m_relu_1", "m_dense_2", "m_relu_2", "m_dense_3",
                                            "dense_4", "leaky_relu_1"});
  REQUIRE(model.output_shape() == Shape{2});
  // The shortcut allows linear and the registered activations, nothing else.
  REQUIRE_THROWS_WITH(
      parse(std::string(kBase), {"model.layers.2.activation=rleu"}),
      Contains("model.layers.2.activation: 'rleu' is not allowed (did you mean 'relu'?); "
               "allowed: linear, relu, sigmoid, tanh, gelu, leaky_relu, softmax, log_softmax"));
  REQUIRE_THROWS_WITH(parse(std::string(kBase), {"model.layers.1.activation=relu"}),
                      Contains("unknown key 'model.layers.1.activation'"));
}

TEST_CASE("optimizers and data formats declare their keys per type and the config load checks them all",
          "[config]") {
  for (const KeyVariant& v : optimizer_keys()) require_documented(v.keys, "optimizer " + v.name);
  for (const KeyVariant& v : data_source_keys()) require_documented(v.keys, "data format " + v.name);
  // A key of another optimizer type is not a key of this one.
  REQUIRE_THROWS_WITH(
      parse(kBase, {"optimizer.beta1=0.8"}),
      Contains("unknown key 'optimizer.beta1'") &&
          Contains("allowed keys in 'optimizer': dampening, lr, momentum, nesterov, scale_lr, "
                   "type, weight_decay"));
  REQUIRE(parse(kBase, {"optimizer.type=adam", "optimizer.beta1=0.8"}).optimizer.hyper.f("beta1") == 0.8f);
  // Data sources are validated when the config loads, before any verb reads a file.
  REQUIRE_THROWS_WITH(parse(kBase, {"data.train.format=idxx"}),
                      Contains("data.train.format: 'idxx' is not allowed (did you mean 'idx'?)"));
  REQUIRE_THROWS_WITH(parse(kBase, {"data.train={format: csv, path: a.csv, delimiter: ';;'}"}),
                      Contains("data.train.delimiter: must be one character or 'whitespace', found ';;'"));
  REQUIRE_THROWS_WITH(parse(kBase, {"data.validation={format: idx, images: x.gz}"}),
                      Contains("data.validation.labels: is required for format idx"));
  // The resolved config holds every source key with its default.
  Config c = parse(kBase, {"data.train={format: sequences, path: s.txt}"});
  REQUIRE(c.resolved["data"]["train"]["maxlen"].as<int>() == 0);
  REQUIRE(c.resolved["data"]["train"]["padding"].as<std::string>() == "pre");
  REQUIRE(c.resolved["data"]["train"]["limit"].as<int>() == 0);
}

TEST_CASE("summary rejects every bad key that fit rejects, with the same message", "[cli]") {
  const std::string dir = test::temp_dir("schema_summary");
  const std::string cfg = test::write_file(dir, "c.yaml", kBase);
  for (const char* set : {"data.train.format=idxx", "model.layers.0.filtres=3", "optimizer.momentum=2",
                          "model.layers.2={type: mlp, depth: 2}", "device=tpu", "device.memory_limit=-1"}) {
    CAPTURE(set);
    auto fit = test::run_trainer("fit " + cfg + " --no-out --set '" + set + "'");
    auto summary = test::run_trainer("summary " + cfg + " --set '" + set + "'");
    REQUIRE(fit.exit_code == 3);
    REQUIRE(summary.exit_code == 3);
    REQUIRE_THAT(fit.err, StartsWith("error: "));
    REQUIRE(summary.err == fit.err);
  }
}

TEST_CASE("one device-string parser: cpu, auto, gpu, gpu:N and nothing else", "[config][device]") {
  REQUIRE(parse_device("cpu")->str() == "cpu");
  REQUIRE(parse_device("auto")->str() == "auto");
  REQUIRE(parse_device("gpu")->str() == "gpu:0");
  REQUIRE(parse_device("gpu:7")->index == 7);
  REQUIRE(parse_device("gpu:999")->index == 999);
  for (const char* bad :
       {"", "GPU", "gpu:", "gpu:-1", "gpu:1000", "gpu:1x", "gpu0", "cuda:0", "cpu:0", " cpu"}) {
    CAPTURE(bad);
    REQUIRE_FALSE(parse_device(bad));
  }
  DeviceRequest req;
  req.device = "gpu:x";
  REQUIRE_THROWS_WITH(BackendRegistry::global().create(req, nullptr),
                      Contains("unknown device 'gpu:x'; allowed: cpu, auto, gpu, gpu:N"));
}

TEST_CASE("several GPUs: gpu:N,M,... and gpu:all parse; a repeated or absent GPU is a usage error naming it",
          "[config][device]") {
  const DeviceSpec two = *parse_device("gpu:0,1");
  REQUIRE(two.several());
  REQUIRE(two.str() == "gpu:0,1");
  REQUIRE(parse_device("gpu:all")->several());
  REQUIRE(parse_device("gpu:all")->str() == "gpu:all");
  REQUIRE_FALSE(parse_device("gpu:3")->several());  // a list of one is one GPU
  for (const char* bad : {"gpu:0,", "gpu:,1", "gpu:0,,1", "gpu:0;1", "gpu:al", "gpu:0,1000", "gpu: 0,1"}) {
    CAPTURE(bad);
    REQUIRE_FALSE(parse_device(bad));
  }
  REQUIRE(check_gpu_list(two, 2) == std::vector<int>{0, 1});
  REQUIRE(check_gpu_list(*parse_device("gpu:all"), 3) == std::vector<int>{0, 1, 2});
  REQUIRE_THROWS_AS(check_gpu_list(*parse_device("gpu:1,1"), 2), UsageError);
  REQUIRE_THROWS_WITH(
      check_gpu_list(*parse_device("gpu:1,0,1"), 2),
      "--device gpu:1,0,1: gpu:1 is listed twice; each GPU takes one replica: list each once");
  REQUIRE_THROWS_WITH(check_gpu_list(two, 1),
                      "--device gpu:0,1: gpu:1 is not present; this process sees one GPU, gpu:0 "
                      "(CUDA_VISIBLE_DEVICES is respected)");
  REQUIRE_THROWS_WITH(check_gpu_list(*parse_device("gpu:all"), 0),
                      "--device gpu:all: this process sees no GPU");
  // Only fit trains on several GPUs; the other verbs create one backend.
  DeviceRequest req;
  req.device = "gpu:0,1";
  REQUIRE_THROWS_WITH(BackendRegistry::global().create(req, nullptr),
                      Contains("device gpu:0,1 names several GPUs; only trainer fit trains on several"));
  // The config: a string or device.gpus, resolved to the mapping.
  Config c = parse(std::string(kBase) + "device: gpu:0,1\n");
  REQUIRE(c.device == "gpu:0,1");
  REQUIRE(YAML::Dump(c.resolved["device"]) ==
          "type: gpu\ngpus: 0,1\nmemory_limit: 0\nmemory_growth: false\nbucket_mb: 25\ngradient_compression: "
          "none\nsync_batchnorm: false");
  REQUIRE(parse(std::string(kBase) + "device: {type: gpu, gpus: all}\n").device == "gpu:all");
  REQUIRE_THROWS_WITH(
      parse(std::string(kBase) + "device: {type: gpu, gpus: '0,x'}\n"),
      Contains("device.gpus: '0,x' is not a GPU list; allowed: N,M,... (GPU indices) or all"));
  REQUIRE_THROWS_WITH(parse(std::string(kBase) + "device: {type: gpu, id: 1, gpus: '0,1'}\n"),
                      Contains("device.gpus: and device.id both name GPUs; give one of them"));
  REQUIRE_THROWS_WITH(parse(std::string(kBase) + "device: {type: cpu, gpus: '0,1'}\n"),
                      Contains("device.gpus: is only for type gpu"));
}

TEST_CASE("device: takes a string or a mapping and both resolve to the mapping", "[config][device]") {
  Config s = parse(std::string(kBase) + "device: gpu:1\n");
  REQUIRE(s.device == "gpu:1");
  REQUIRE(s.memory_limit_mib == 0);
  REQUIRE_FALSE(s.memory_growth);
  REQUIRE(YAML::Dump(s.resolved["device"]) ==
          "type: gpu\nid: 1\nmemory_limit: 0\nmemory_growth: false\nbucket_mb: 25\ngradient_compression: "
          "none\nsync_batchnorm: false");
  Config m =
      parse(std::string(kBase) + "device: {type: gpu, id: 0, memory_limit: 4096, memory_growth: true}\n");
  REQUIRE(m.device == "gpu:0");
  REQUIRE(m.memory_limit_mib == 4096);
  REQUIRE(m.memory_growth);
  REQUIRE(parse(std::string(kBase) + "device: {type: auto, memory_limit: 64}\n").device == "auto");
  REQUIRE(YAML::Dump(parse(kBase).resolved["device"]) ==
          "type: cpu\nmemory_limit: 0\nmemory_growth: false\nbucket_mb: 25\ngradient_compression: "
          "none\nsync_batchnorm: false");
  // --set reaches the keys of either form.
  Config set = parse(std::string(kBase) + "device: gpu:1\n", {"device.memory_limit=512"});
  REQUIRE(set.device == "gpu:1");
  REQUIRE(set.memory_limit_mib == 512);
  // Bad values: one line with file:line:column, the key and what is allowed.
  REQUIRE_THROWS_WITH(
      parse(std::string(kBase) + "device: tpu\n"),
      Contains("test.yaml:12:9: device: 'tpu' is not a device; allowed: cpu, auto, gpu, gpu:N, "
               "or a mapping"));
  REQUIRE_THROWS_WITH(parse(std::string(kBase) + "device: {type: cpu, id: 1}\n"),
                      Contains("test.yaml:12:25: device.id: is only for type gpu"));
  REQUIRE_THROWS_WITH(parse(std::string(kBase) + "device: {type: gpu, memory_limit: lots}\n"),
                      Contains("test.yaml:12:35: device.memory_limit: expected an integer, got 'lots'"));
  REQUIRE_THROWS_WITH(parse(std::string(kBase) + "device: {type: gpu, memory_growht: true}\n"),
                      Contains("test.yaml:12:21: unknown key 'device.memory_growht' (did you mean "
                               "'memory_growth'?)"));
  REQUIRE_THROWS_WITH(parse(std::string(kBase) + "device: {type: tpu}\n"),
                      Contains("device.type: 'tpu' is not allowed") && Contains("allowed: cpu, gpu, auto"));
  REQUIRE_THROWS_WITH(parse(std::string(kBase) + "device: [gpu]\n"), Contains("'device' must be a mapping"));
}

TEST_CASE("device.bucket_mb caps the gradient buckets of several GPUs; 0 leaves one bucket",
          "[config][device]") {
  REQUIRE(parse(kBase).bucket_mb == 25);  // PyTorch DDP's bucket_cap_mb
  Config c = parse(std::string(kBase) + "device: {type: gpu, gpus: '0,1', bucket_mb: 4}\n");
  REQUIRE(c.bucket_mb == 4);
  REQUIRE(YAML::Dump(c.resolved["device"]) ==
          "type: gpu\ngpus: 0,1\nmemory_limit: 0\nmemory_growth: false\nbucket_mb: 4\ngradient_compression: "
          "none\nsync_batchnorm: false");
  // --set reaches it in either form; fractions of a MiB and 0 are allowed.
  REQUIRE(parse(std::string(kBase) + "device: gpu:0,1\n", {"device.bucket_mb=0.5"}).bucket_mb == 0.5);
  REQUIRE(parse(kBase, {"device.bucket_mb=0"}).bucket_mb == 0);
  REQUIRE_THROWS_WITH(parse(std::string(kBase) + "device: {type: gpu, bucket_mb: -1}\n"),
                      Contains("test.yaml:12:32: device.bucket_mb: value -1 is out of range; allowed: [0, "));
  REQUIRE_THROWS_WITH(parse(std::string(kBase) + "device: {type: gpu, bucket_mb: big}\n"),
                      Contains("test.yaml:12:32: device.bucket_mb: expected a number, got 'big'"));
}

TEST_CASE("device.gradient_compression is none, bf16 or fp16, none by default, and is written back",
          "[config][device]") {
  REQUIRE(parse(kBase).gradient_compression == "none");
  Config c = parse(std::string(kBase) + "device: {type: gpu, gpus: '0,1', gradient_compression: bf16}\n");
  REQUIRE(c.gradient_compression == "bf16");
  REQUIRE(c.resolved["device"]["gradient_compression"].Scalar() == "bf16");
  REQUIRE(parse(std::string(kBase) + "device: gpu:0,1\n", {"device.gradient_compression=fp16"})
              .gradient_compression == "fp16");
  REQUIRE_THROWS_WITH(
      parse(std::string(kBase) + "device: {type: gpu, gradient_compression: int8}\n"),
      Contains("test.yaml:12:43: device.gradient_compression: 'int8' is not allowed; allowed: none, "
               "bf16, fp16"));
}

TEST_CASE("device.sync_batchnorm is true or false, false by default, and is written back",
          "[config][device][sync_batchnorm]") {
  REQUIRE_FALSE(parse(kBase).sync_batchnorm);
  Config c = parse(std::string(kBase) + "device: {type: gpu, gpus: '0,1', sync_batchnorm: true}\n");
  REQUIRE(c.sync_batchnorm);
  REQUIRE(YAML::Dump(c.resolved["device"]) ==
          "type: gpu\ngpus: 0,1\nmemory_limit: 0\nmemory_growth: false\nbucket_mb: 25\ngradient_compression: "
          "none\nsync_batchnorm: true");
  // --set reaches it in either form (a device string becomes the mapping).
  REQUIRE(parse(std::string(kBase) + "device: gpu:0,1\n", {"device.sync_batchnorm=true"}).sync_batchnorm);
  REQUIRE(parse(kBase, {"device.sync_batchnorm=true"}).sync_batchnorm);
  REQUIRE_THROWS_WITH(
      parse(std::string(kBase) + "device: {type: gpu, sync_batchnorm: maybe}\n"),
      Contains("test.yaml:12:37: device.sync_batchnorm: expected true or false, got 'maybe'"));
  REQUIRE_THROWS_WITH(parse(kBase, {"device.sync_batchnorm=2"}),
                      Contains("device.sync_batchnorm: expected true or false, got '2'"));
  REQUIRE_THROWS_WITH(parse(std::string(kBase) + "device: {type: gpu, sync_batchnorm: [true]}\n"),
                      Contains("test.yaml:12:37: device.sync_batchnorm: expected true or false"));
}

TEST_CASE("optimizer.scale_lr: linear multiplies lr by the replicas, none (the default) keeps it",
          "[config][optimizer]") {
  const Config none = parse(kBase);
  REQUIRE_FALSE(none.optimizer.scale_lr_linear);
  REQUIRE(none.resolved["optimizer"]["scale_lr"].Scalar() == "none");
  REQUIRE(base_lr(none.optimizer, 4) == 0.1);
  for (const char* type : {"sgd", "adam", "adamw", "nadam", "rmsprop"}) {
    INFO(type);
    const Config lin = parse(kBase, {std::string("optimizer.type=") + type, "optimizer.scale_lr=linear"});
    REQUIRE(lin.optimizer.scale_lr_linear);
    REQUIRE(base_lr(lin.optimizer, 1) == lin.optimizer.lr);  // one process: factor 1
    REQUIRE(base_lr(lin.optimizer, 3) == Approx(3 * lin.optimizer.lr));
  }
  std::string bad = kBase;
  bad.replace(bad.find("lr: 0.1}"), 8, "lr: 0.1, scale_lr: sqrt}");
  REQUIRE_THROWS_WITH(parse(bad), Contains("test.yaml:7:43: optimizer.scale_lr: 'sqrt' is not allowed") &&
                                      Contains("allowed: none, linear"));
  REQUIRE_THROWS_WITH(parse(kBase, {"optimizer.scale_lr=linaer"}),
                      Contains("optimizer.scale_lr: 'linaer' is not allowed (did you mean 'linear'?)"));
}

TEST_CASE("the device flags override the file's device keys: --print-config and config.yaml show the result",
          "[cli][device]") {
  const std::string dir = test::temp_dir("schema_device");
  const std::string cfg = test::write_file(
      dir, "c.yaml",
      std::string(kBase) + "device: {type: gpu, id: 1, memory_limit: 4096, memory_growth: true}\n");
  auto file = test::run_trainer("fit " + cfg + " --print-config");
  REQUIRE(file.exit_code == 0);
  REQUIRE_THAT(file.out,
               Contains("device:\n  type: gpu\n  id: 1\n  memory_limit: 4096\n  memory_growth: true\n"));
  auto flags = test::run_trainer("fit " + cfg + " --print-config --device cpu --mem-limit 64");
  REQUIRE(flags.exit_code == 0);
  REQUIRE_THAT(flags.out, Contains("device:\n  type: cpu\n  memory_limit: 64\n  memory_growth: true\n"));
  auto gpu = test::run_trainer("fit " + cfg + " --print-config --device gpu --set device.memory_limit=5");
  REQUIRE_THAT(gpu.out,
               Contains("device:\n  type: gpu\n  id: 0\n  memory_limit: 5\n  memory_growth: true\n"));
  auto bad = test::run_trainer("eval " + cfg + " --weights x --device gpu:x");
  REQUIRE(bad.exit_code == 2);
  REQUIRE_THAT(bad.err, Contains("--device gpu:x: allowed: cpu, auto, gpu, gpu:N"));
  // A CPU run records the device it was given in its run directory; eval and bench take the cap too.
  const std::string run = dir + "/run";
  auto fit = test::run_trainer("fit " + cfg + " --device cpu --mem-limit 32 --epochs 1 --out " + run);
  REQUIRE(fit.exit_code == 0);
  REQUIRE_THAT(test::slurp(run + "/config.yaml"),
               Contains("device:\n  type: cpu\n  memory_limit: 32\n  memory_growth: true\n"));
  REQUIRE(test::run_trainer("eval " + cfg + " --weights " + run + " --device cpu --split train").exit_code ==
          0);
  auto bench = test::run_trainer("bench " + cfg + " --device cpu --steps 2 --warmup 0 --mem-limit 1");
  REQUIRE(bench.exit_code == 0);
  // The config's own cap is honoured: a model that does not fit stops before training.
  auto capped =
      test::run_trainer("bench " + cfg + " --steps 2 --warmup 0 --set model.layers.0.filters=2000 " +
                        "--set 'device={type: cpu, memory_limit: 1}'");
  REQUIRE(capped.exit_code == 5);
  REQUIRE_THAT(capped.err, Contains("cap 1.00 MiB"));
  // predict too: a model of 1.5 MiB of parameters runs without a cap and stops under the config's.
  const std::string big = dir + "/big";
  REQUIRE(test::run_trainer("fit " + cfg +
                            " --device cpu --epochs 1 --set model.layers.0.filters=2000 --out " + big)
              .exit_code == 0);
  std::string row;
  for (int i = 0; i < 64; ++i) row += (i ? "," : "") + std::to_string(i % 5);
  const std::string x = test::write_file(dir, "x.csv", row + "\n" + row + "\n");
  const std::string predict = "predict " + cfg + " --weights " + big + " --input " + x + " --output " + dir +
                              "/p.csv --device cpu --set model.layers.0.filters=2000";
  REQUIRE(test::run_trainer(predict).exit_code == 0);
  auto capped_predict = test::run_trainer(predict + " --set device.memory_limit=1");
  REQUIRE(capped_predict.exit_code == 5);
  REQUIRE_THAT(capped_predict.err, Contains("cap 1.00 MiB"));
}

TEST_CASE("YAML merge keys are applied: explicit keys win, then the merged mappings in order",
          "[config][merge]") {
  const std::string text = R"(model:
  input_shape: [1, 8, 8]
  layers:
    - &conv {type: conv2d, filters: 2, kernel_size: 3, padding: same}
    - {<<: *conv, filters: 4}
    - <<: [{kernel_size: 5, strides: 2}, *conv]
      filters: 6
    - {type: flatten}
    - {type: dense, units: 3}
optimizer:
  <<: {type: sgd, lr: 0.1, momentum: 0.9}
  lr: 0.5
data:
  train: {format: random, samples: 50}
  num_classes: 3
)";
  Config c = parse(text);
  REQUIRE(c.optimizer.type == "sgd");
  REQUIRE(c.optimizer.lr == 0.5);
  REQUIRE(c.optimizer.hyper.f("momentum") == 0.9f);
  Model m(c.input_shape, c.layers, c.init, c.file);
  REQUIRE(m.num_params() == (2 * 9 + 2) + (4 * 2 * 9 + 4) + (6 * 4 * 25 + 6) + (6 * 4 * 4 * 3 + 3));
  REQUIRE(m.layers()[2]->output_shape() == Shape{6, 4, 4});
  // --set on a merged key changes that layer only, not the anchor the others share.
  Config s = parse(text, {"model.layers.1.kernel_size=1"});
  Model ms(s.input_shape, s.layers, s.init, s.file);
  REQUIRE(ms.params()[0].shape == Shape{2, 1, 3, 3});
  REQUIRE(ms.params()[2].shape == Shape{4, 2, 1, 1});
  // Errors in merged keys point at the line where they are written.
  std::string bad = text;
  bad.replace(bad.find("padding: same"), 13, "paddng: same");
  REQUIRE_THROWS_WITH(parse(bad), Contains("test.yaml:4:56: unknown key 'model.layers.0.paddng'"));
  std::string lr = text;
  lr.replace(lr.find("lr: 0.1,"), 8, "lr: x,");
  lr.replace(lr.find("  lr: 0.5\n"), 10, "");
  REQUIRE_THROWS_WITH(parse(lr), Contains("test.yaml:11:23: optimizer.lr: expected a number, got 'x'"));
  // A merge of anything but mappings is one line naming where.
  REQUIRE_THROWS_WITH(parse(std::string(kBase) + "train:\n  <<: 5\n"),
                      Contains("test.yaml:13:7: the merge key '<<' takes a mapping or a list of mappings") &&
                          Contains("got a single value"));
  REQUIRE_THROWS_WITH(parse(std::string(kBase) + "train:\n  <<: [{epochs: 1}, [2]]\n"),
                      Contains("test.yaml:13:21: the merge key '<<' takes a mapping or a list of mappings") &&
                          Contains("item 1 of its list is not a mapping"));
  // A quoted "<<" is an ordinary key, and so unknown here.
  REQUIRE_THROWS_WITH(parse(std::string(kBase) + "train:\n  \"<<\": {epochs: 1}\n"),
                      Contains("unknown key 'train.<<'"));
}

TEST_CASE("the resolved config of every shipped config is itself a config that resolves to the same text",
          "[cli][config]") {
  // What --print-config prints is what a run directory's config.yaml holds: a config of its own.
  const std::string dir = test::temp_dir("schema_roundtrip");
  for (const char* name : {"fashion_mnist_cnn", "fashion_mnist_sgd", "mnist_cnn", "cifar10_cnn",
                           "reuters_conv1d", "reuters_transformer", "mlp_disc", "gpt2_small"}) {
    CAPTURE(name);
    auto first = test::run_trainer("fit " + std::string(TRAINER_SOURCE_DIR) + "/configs/" + name +
                                   ".yaml --print-config --device gpu:2 --mem-limit 100");
    REQUIRE(first.exit_code == 0);
    REQUIRE_THAT(first.out, Contains("device:\n  type: gpu\n  id: 2\n  memory_limit: 100\n"));
    const std::string resolved = test::write_file(dir, std::string(name) + ".yaml", first.out);
    auto second = test::run_trainer("fit " + resolved + " --print-config");
    REQUIRE(second.exit_code == 0);
    REQUIRE(second.out == first.out);
  }
}
