// Helpers shared by the CPU tests: layers from YAML snippets, seeded random tensors, and running
// the trainer binary as a user would.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/core/rng.h"
#include "lib/keys/node_reader.h"
#include "lib/model/executor.h"
#include "lib/registry/layer.h"
#include "lib/registry/registry.h"

namespace trainer::test {

// Builds one layer from a flow-style YAML mapping, e.g. "{type: conv2d, filters: 3, kernel_size: 3}".
inline std::unique_ptr<Layer> make_layer(const std::string& yaml, const Shape& input, int index = 0) {
  YAML::Node node = YAML::Load(yaml);
  NodeReader r(node, "layer", "test");
  const std::string type = r.string("type", "");
  auto layer = Registry::global().layer(type, "test").make_layer(r);
  r.finish();  // a key the layer does not know is a mistake in the test
  layer->set_identity(type, type + "_test");
  layer->build(input, index);
  return layer;
}

inline std::vector<float> random_vector(size_t n, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  SplitMix64 rng = SplitMix64::counter(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = lo + (hi - lo) * float(rng.uniform());
  return v;
}

// Executor options of a classifier trained on logits (the tests' usual model): these batch sizes,
// `classes` classes, softmax cross-entropy from logits; everything else at its default.
inline ExecutorOptions classifier_options(std::vector<int64_t> batch_sizes, int64_t classes) {
  ExecutorOptions o;
  o.batch_sizes = std::move(batch_sizes);
  o.num_classes = classes;
  o.loss = loss_config("cross_entropy");
  return o;
}

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

// Runs the built trainer binary with arguments (shell-quoted by the caller), capturing both streams.
CommandResult run_trainer(const std::string& args);

// A fresh temporary directory for one test.
std::string temp_dir(const std::string& tag);

std::string write_file(const std::string& dir, const std::string& name, const std::string& text);

// The whole file as bytes ("" when it cannot be read).
std::string slurp(const std::string& path);

}  // namespace trainer::test
