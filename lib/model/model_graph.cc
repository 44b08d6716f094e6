// The model's graph: each declared layer's inputs resolved to layers, a fixed topological order
// (declaration order wherever the graph allows it, so a plain list runs exactly as written), and
// every shape inferred in that order, before anything is allocated.
#include <map>
#include <set>

#include "lib/core/error.h"
#include "lib/keys/node_reader.h"
#include "lib/model/model.h"

namespace trainer {

void Model::build_graph(const std::vector<LayerDecl>& decls, std::vector<std::unique_ptr<Layer>>& made,
                        const std::map<std::string, int>& by_name) {
  const int n = int(decls.size());
  // 1. Inputs, as declaration indices (-1: the model's input).
  std::vector<std::vector<int>> in(static_cast<size_t>(n));
  std::vector<std::string> names;
  for (const auto& kv : by_name) names.push_back(kv.first);
  for (int i = 0; i < n; ++i) {
    const LayerDecl& d = decls[size_t(i)];
    if (d.inputs.empty()) in[size_t(i)].push_back(i - 1);
    for (const InputRef& r : d.inputs) {
      if (r.decl != InputRef::kByName) {
        in[size_t(i)].push_back(r.decl);
        continue;
      }
      auto it = by_name.find(r.name);
      if (it == by_name.end() && !r.fallback.empty()) it = by_name.find(r.fallback);
      if (it == by_name.end()) {
        const std::string written = r.fallback.empty() ? r.name : r.fallback;
        std::vector<std::string> candidates = names;
        candidates.push_back("input");
        const std::string near = closest_match(written, candidates);
        std::string known;
        if (names.size() <= 24)
          for (size_t k = 0; k < names.size(); ++k) known += (k ? ", " : "") + names[k];
        throw ConfigError(
            d.where + ".inputs: layer '" + made[size_t(i)]->name() + "' names an unknown input '" + written +
            "'" + (near.empty() ? "" : " (did you mean '" + near + "'?)") + "; inputs are layer names" +
            (known.empty() ? "" : " (" + known + ")") + " or 'input', the model's input");
      }
      in[size_t(i)].push_back(it->second);
    }
  }

  // 2. A topological order: among the layers whose inputs are all computed, the first declared.
  std::vector<int> pending(static_cast<size_t>(n), 0), order;
  std::vector<std::vector<int>> consumers(static_cast<size_t>(n));
  std::vector<bool> input_used(1, false);
  for (int i = 0; i < n; ++i) {
    std::set<int> distinct(in[size_t(i)].begin(), in[size_t(i)].end());
    for (int p : distinct) {
      if (p < 0) {
        input_used[0] = true;
        continue;
      }
      ++pending[size_t(i)];
      consumers[size_t(p)].push_back(i);
    }
  }
  std::set<int> ready;
  for (int i = 0; i < n; ++i)
    if (!pending[size_t(i)]) ready.insert(i);
  while (!ready.empty()) {
    const int i = *ready.begin();
    ready.erase(ready.begin());
    order.push_back(i);
    for (int c : consumers[size_t(i)])
      if (--pending[size_t(c)] == 0) ready.insert(c);
  }
  if (int(order.size()) < n) {
    // Walk back along inputs that never became ready until a layer repeats: that is a cycle.
    int at = 0;
    while (!pending[size_t(at)]) ++at;
    std::vector<int> path;
    std::vector<int> seen(static_cast<size_t>(n), -1);
    while (seen[size_t(at)] < 0) {
      seen[size_t(at)] = int(path.size());
      path.push_back(at);
      for (int p : in[size_t(at)])
        if (p >= 0 && pending[size_t(p)]) {
          at = p;
          break;
        }
    }
    // path[k + 1] is an input of path[k]: the data flows from the path's end back to `at`.
    std::string cycle;
    for (size_t k = path.size(); k-- > size_t(seen[size_t(at)]);)
      cycle += made[size_t(path[k])]->name() + " -> ";
    cycle += made[size_t(path.back())]->name();
    throw ConfigError(decls[size_t(at)].where + ": the layers' inputs form a cycle: " + cycle +
                      " (each arrow: the output of one layer is an input of the next)");
  }

  // 3. Every output is used: by a layer, or as the model's output (the last declared layer).
  if (!input_used[0])
    throw ConfigError(
        "model.layers: no layer takes the model's input; the first layer does unless it "
        "names other inputs: add 'input' to some layer's inputs");
  for (int i = 0; i + 1 < n; ++i)
    if (consumers[size_t(i)].empty())
      throw ConfigError(decls[size_t(i)].where + ": the output of layer '" + made[size_t(i)]->name() + "' (" +
                        made[size_t(i)]->type() +
                        ") is not used: only the last layer's output leaves the model; name it in a later "
                        "layer's inputs or remove the layer");
  if (!consumers[size_t(n - 1)].empty())
    throw ConfigError(decls[size_t(n - 1)].where + ": the last layer '" + made[size_t(n - 1)]->name() +
                      "' is the model's output, so no layer may take it as an input");

  // 4. Layers in that order (the last declared one is last: it is the only layer nobody uses),
  // and their shapes.
  std::vector<int> position(static_cast<size_t>(n));
  for (int k = 0; k < n; ++k) position[size_t(order[size_t(k)])] = k;
  for (int k = 0; k < n; ++k) {
    const int i = order[size_t(k)];
    std::vector<int> from;
    std::vector<Shape> shapes;
    for (int p : in[size_t(i)]) {
      from.push_back(p < 0 ? -1 : position[size_t(p)]);
      shapes.push_back(p < 0 ? input_ : layers_[size_t(position[size_t(p)])]->output_shape());
    }
    made[size_t(i)]->build(shapes, k);
    inputs_.push_back(std::move(from));
    layers_.push_back(std::move(made[size_t(i)]));
  }
}

std::vector<int> Model::consumers(int producer) const {
  std::vector<int> c;
  for (size_t i = 0; i < inputs_.size(); ++i)
    for (int p : inputs_[i])
      if (p == producer) {
        c.push_back(int(i));
        break;
      }
  return c;
}

}  // namespace trainer
