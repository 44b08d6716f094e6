#include "lib/model/model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <thread>
#include <vector>

#include "lib/core/error.h"
#include "lib/core/rng.h"
#include "lib/core/usable_cores.h"
#include "lib/keys/node_reader.h"
#include "lib/layers/embedding.h"
#include "lib/layers/sequence_layer.h"
#include "lib/model/arena_layout.h"
#include "lib/registry/registry.h"

namespace trainer {

Model::Model(const Shape& input_shape, const YAML::Node& layers, InitScheme init, const std::string& file,
             const YAML::Node& blocks)
    : input_(input_shape), init_(init) {
  std::vector<LayerDecl> decls = read_layer_list(layers, file, blocks);
  std::vector<std::unique_ptr<Layer>> made;
  std::map<std::string, int> type_count, by_name;
  for (const LayerDecl& d : decls) {
    std::unique_ptr<Layer> layer = d.entry->make(d.values);
    std::string name = d.name;
    // Keras' naming: conv2d_1, counting every layer of the type outside blocks (a block names its own)
    const int n = d.in_block ? 0 : ++type_count[d.type];
    if (name.empty()) name = d.type + "_" + std::to_string(n);
    if (name == "input")
      throw ConfigError(d.where + ": the name 'input' is reserved for the model's input (inputs: [input])");
    if (by_name.count(name)) {
      // "file:1:2: model.layers.3" -> "model.layers.3": where the other layer was declared.
      const std::string& other = decls[size_t(by_name[name])].where;
      const size_t cut = other.rfind(": ");
      const std::string taker = cut == std::string::npos ? other : other.substr(cut + 2);
      if (d.name.empty())
        throw ConfigError(d.where + ": its default name '" + name + "' is taken by " + taker +
                          "; name one of them");
      throw ConfigError("model.layers: duplicate layer name '" + name + "' (" + d.where + " and " + taker +
                        ")");
    }
    by_name[name] = int(made.size());
    layer->set_identity(d.type, name);
    made.push_back(std::move(layer));
  }
  build_graph(decls, made, by_name);
  const auto where = [&](const std::string& name) { return decls[size_t(by_name.at(name))].where; };
  check_ties(where);
  check_row_inputs(where);
  lay_out_arenas();
}

int Model::index_of(const std::string& name) const {
  for (size_t i = 0; i < layers_.size(); ++i)
    if (layers_[i]->name() == name) return int(i);
  return -1;
}

void Model::check_row_inputs(const std::function<std::string(const std::string&)>& where) const {
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = *layers_[i];
    if (!dynamic_cast<const SequenceLayer*>(&l)) continue;
    const int from = inputs_[i].empty() ? -1 : inputs_[i][0];
    if (from < 0) continue;
    const auto* e = dynamic_cast<const Embedding*>(layers_[size_t(from)].get());
    if (!e || !e->channels_first) continue;
    throw ConfigError(
        where(l.name()) + ": " + l.type() + " reads a sequence as rows (positions, features), but '" +
        e->name() + "' gives " + e->output_shape().str() +
        " (features, positions: an embedding's default, for conv1d); set channels_first: false on '" +
        e->name() + "'");
  }
}

void Model::check_ties(const std::function<std::string(const std::string&)>& where) const {
  std::map<int, std::string> tied;  // embedding -> the layer that reads its table
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = *layers_[i];
    const std::string to = l.tie_to();
    if (to.empty()) continue;
    const std::string at = where(l.name()) + ": tie_to: ";
    const int t = index_of(to);
    if (t < 0)
      throw ConfigError(at + "no layer is named '" + to + "'; name the embedding whose table to share");
    const Layer& target = *layers_[size_t(t)];
    if (target.type() != "embedding")
      throw ConfigError(at + "'" + to + "' is a " + target.type() +
                        " layer; a weight can be tied only to an embedding's table (input_dim, output_dim)");
    // The reader's backward writes the table's gradient and the embedding's adds to it: a second
    // reader would overwrite the first's share.
    if (tied.count(t))
      throw ConfigError(at + "'" + to + "''s table is read already by '" + tied[t] +
                        "' (tie_to); one layer may share an embedding's table");
    tied[t] = l.name();
    if (t > int(i))
      throw ConfigError(at + "'" + to + "' runs after '" + l.name() +
                        "'; tie to an embedding that comes before the layer, as the token embedding "
                        "comes before the output layer");
    Shape mine, theirs;
    for (const ParamSpec& p : l.param_specs())
      if (p.name == "weight") mine = p.shape;
    for (const ParamSpec& p : target.param_specs())
      if (p.name == "weight") theirs = p.shape;
    if (mine != theirs)
      throw ConfigError(at + "'" + to + "''s table is " + theirs.str() +
                        " (input_dim, output_dim) but this layer's weight is " + mine.str() +
                        " (units, input features): set units: " + std::to_string(theirs[0]) +
                        " and give the layer " + std::to_string(theirs[1]) + " input features");
  }
}

Model::Model(Model&& whole, size_t begin, size_t end) : init_(whole.init_) {
  if (begin >= end || end > whole.layers_.size()) throw InternalError("model stage: bad layer range");
  input_ = begin == 0 ? whole.input_ : whole.layers_[begin - 1]->output_shape();
  for (size_t i = begin; i < end; ++i) {
    const std::string to = whole.layers_[i]->tie_to();
    const int t = to.empty() ? int(begin) : whole.index_of(to);
    if (t < int(begin) || t >= int(end))
      throw ConfigError("model.stages: layer '" + whole.layers_[i]->name() + "' ties its weight to '" + to +
                        "', which is in another stage; a tied tensor lives on one device: keep both layers "
                        "in one stage");
  }
  const int boundary = int(begin) - 1;  // the stage's input, in the whole model's indices
  for (size_t i = begin; i < end; ++i) {
    std::vector<int> from;
    for (int f : whole.inputs_[i]) {
      if (f >= int(begin)) {
        from.push_back(f - int(begin));
      } else if (f == boundary) {
        from.push_back(-1);
      } else {
        throw ConfigError(
            "model.stages: layer '" + whole.layers_[i]->name() + "' takes the output of " +
            (f < 0 ? std::string("the model's input") : "'" + whole.layers_[size_t(f)]->name() + "'") +
            ", which is in an earlier stage; only the output of the layer before a stage ('" +
            whole.layers_[begin - 1]->name() + "', before '" + whole.layers_[begin]->name() +
            "') crosses into it: move the stage boundary so that the connection stays inside one stage");
      }
    }
    inputs_.push_back(std::move(from));
    layers_.push_back(std::move(whole.layers_[i]));
  }
  lay_out_arenas();
}

void Model::lay_out_arenas() {
  // Every tensor fits (Layer::build checked each); the arena totals are checked here. Offsets
  // follow the one alignment rule (lib/model/arena_layout.h), in floats.
  ArenaLayout param_arena(size_t(kMaxArenaElements) * sizeof(float)),
      buffer_arena(size_t(kMaxArenaElements) * sizeof(float));
  auto place = [&](ArenaLayout& arena, const Shape& shape, const Layer& l, const char* what) {
    size_t at = 0;
    if (!arena.place(size_t(shape.numel()) * sizeof(float), &at))
      throw ConfigError(std::string("model.layers: the ") + what + " up to layer '" + l.name() +
                        "' need more than " + with_thousands(kMaxArenaElements) +
                        " floats (2^40); use smaller layers");
    return int64_t(at / sizeof(float));
  };
  layer_params_.assign(layers_.size(), {});
  for (size_t li = 0; li < layers_.size(); ++li) {
    const std::string to = layers_[li]->tie_to();
    for (const ParamSpec& p : layers_[li]->param_specs()) {
      int slot = -1;
      if (p.name == "weight" && !to.empty()) {
        const int t = index_of(to);
        for (size_t k = 0; k < params_.size() && t >= 0; ++k)
          if (params_[k].layer == t && params_[k].spec.name == "weight") slot = int(k);
        if (slot < 0 || params_[size_t(slot)].shape != p.shape)
          throw InternalError("layer '" + layers_[li]->name() + "': tie_to '" + to + "' was not checked");
        params_[size_t(slot)].shared_with.push_back(int(li));
      } else {
        slot = int(params_.size());
        params_.push_back({layers_[li]->name() + "." + p.name,
                           p.shape,
                           place(param_arena, p.shape, *layers_[li], "parameters"),
                           int(li),
                           p,
                           {}});
      }
      layer_params_[li].push_back(slot);
    }
    for (const BufferSpec& b : layers_[li]->buffer_specs()) {
      ParamSpec spec;
      spec.name = b.name;
      spec.shape = b.shape;
      buffers_.push_back({layers_[li]->name() + "." + b.name,
                          b.shape,
                          place(buffer_arena, b.shape, *layers_[li], "buffers"),
                          int(li),
                          spec,
                          {}});
    }
  }
  param_floats_ = int64_t(param_arena.bytes() / sizeof(float));
  buffer_floats_ = int64_t(buffer_arena.bytes() / sizeof(float));
}

void Model::check_batch_size(int64_t batch) const {
  const auto check = [&](const Shape& s, const std::string& what) {
    if (s.fits(kMaxTensorElements, batch)) return;
    throw ConfigError(what + " " + s.batched_str() + " at batch size " + std::to_string(batch) + " has " +
                      s.numel_str(batch) + " elements; one tensor may hold at most " +
                      with_thousands(kMaxTensorElements) + " (2^31 - 1): lower data.batch_size");
  };
  check(input_, "model.input_shape: the input");
  for (size_t i = 0; i < layers_.size(); ++i)
    check(layers_[i]->output_shape(), "model.layers." + std::to_string(i) + " (" + layers_[i]->type() + " '" +
                                          layers_[i]->name() + "'): the output");
}

int64_t Model::layer_num_params(size_t i) const {
  int64_t n = 0;
  for (int k : layer_params_.at(i))
    if (params_[size_t(k)].layer == int(i)) n += params_[size_t(k)].shape.numel();
  return n;
}

int64_t Model::num_params() const {
  int64_t n = 0;
  for (const auto& p : params_) n += p.shape.numel();
  return n;
}

namespace {

// w[i] = value(r) for i in [0, n), each value taking `draws` of rng's numbers in order, the
// stretches of the stream cut among threads (SplitMix64::skip): the same floats as one loop,
// which took ~3 s of GPT-2 small's first step (124M Box-Muller draws). rng ends past them all.
template <class F>
void fill_drawn(float* w, int64_t n, SplitMix64& rng, uint64_t draws, const F& value) {
  constexpr int64_t kPiece = int64_t(1) << 20;
  const int64_t pieces = (n + kPiece - 1) / kPiece;
  const int threads = int(std::min<int64_t>(pieces, usable_cores()));
  const auto run = [&](int t) {
    for (int64_t p = t; p < pieces; p += threads) {
      SplitMix64 r = rng;
      r.skip(uint64_t(p * kPiece) * draws);
      for (int64_t i = p * kPiece; i < std::min(n, (p + 1) * kPiece); ++i) w[i] = value(r);
    }
  };
  if (threads <= 1) {
    run(0);
  } else {
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(run, t);
    run(0);
    for (std::thread& th : pool) th.join();
  }
  rng.skip(uint64_t(n) * draws);
}

}  // namespace

void Model::initialize(float* params, float* buffers, uint64_t seed) const {
  SplitMix64 rng = SplitMix64::counter(seed ^ 0x1A17u);
  const auto normal = [](SplitMix64& r) {  // Box-Muller, one draw of each pair
    const double u1 = std::max(r.uniform(), 1e-300), u2 = r.uniform();
    return std::sqrt(-2 * std::log(u1)) * std::cos(2 * M_PI * u2);
  };
  int attention_layers = 0;
  for (const auto& l : layers_) attention_layers += l->type() == "multi_head_attention";
  std::fill(params, params + param_floats_, 0.f);
  for (const TensorSlot& s : params_) {
    float* w = params + s.offset;
    const int64_t n = s.shape.numel();
    const ParamSpec& p = s.spec;
    double bound = 0;
    if (init_ == InitScheme::gpt2) {
      if (p.role == ParamRole::bias || p.role == ParamRole::beta) continue;  // zeros
      if (p.role == ParamRole::gamma) {
        std::fill(w, w + n, 1.f);
        continue;
      }
      const std::string tail = "c_proj.weight";
      const bool residual =
          s.name.size() >= tail.size() && s.name.compare(s.name.size() - tail.size(), tail.size(), tail) == 0;
      const double std = residual ? 0.02 / std::sqrt(2.0 * std::max(1, attention_layers)) : 0.02;
      fill_drawn(w, n, rng, 2, [&](SplitMix64& r) { return float(std * normal(r)); });
      continue;
    }
    switch (p.role) {
      case ParamRole::gamma:
        std::fill(w, w + n, 1.f);
        continue;
      case ParamRole::beta:
        std::fill(w, w + n, 0.f);
        continue;
      case ParamRole::embedding:
        // PyTorch: N(0, 1); Keras: U(-0.05, 0.05). Both via uniform draws for determinism.
        if (init_ == InitScheme::keras) {
          bound = 0.05;
          break;
        }
        fill_drawn(w, n, rng, 2, [&](SplitMix64& r) { return float(normal(r)); });
        continue;
      case ParamRole::weight:
        bound = init_ == InitScheme::torch ? 1.0 / std::sqrt(double(p.fan_in))
                                           : std::sqrt(6.0 / double(p.fan_in + p.fan_out));
        break;
      case ParamRole::bias:
        if (init_ == InitScheme::keras) continue;  // zeros
        bound = 1.0 / std::sqrt(double(p.fan_in));
        break;
    }
    fill_drawn(w, n, rng, 1, [&](SplitMix64& r) { return float((2 * r.uniform() - 1) * bound); });
  }
  for (const TensorSlot& b : buffers_) {
    const auto specs = layers_[b.layer]->buffer_specs();
    float v = 0.f;
    for (const auto& bs : specs)
      if (layers_[b.layer]->name() + "." + bs.name == b.name) v = bs.init;
    std::fill(buffers + b.offset, buffers + b.offset + b.shape.numel(), v);
  }
}

std::string Model::summary() const {
  char line[512];
  std::string out;
  const std::string rule(100, '_'), double_rule(100, '=');
  const char* format = "%-28s %-16s %-22s %12s  %s\n";
  std::snprintf(line, sizeof line, format, "Layer", "Type", "Output Shape", "Param #", "Connected to");
  out += rule + "\n" + line + double_rule + "\n";
  std::snprintf(line, sizeof line, "%-28s %-16s %-22s %12s\n", "input", "input", input_.batched_str().c_str(),
                "0");
  out += line;
  // As Keras prints them: a layer's Param # counts its buffers (batchnorm's running statistics)
  // too, and Total params = Trainable + Non-trainable, so the column sums to the total.
  std::vector<int64_t> layer_buffers(layers_.size(), 0);
  int64_t buffers = 0;
  for (const auto& b : buffers_) {
    layer_buffers[size_t(b.layer)] += b.shape.numel();
    buffers += b.shape.numel();
  }
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = *layers_[i];
    std::string from;
    for (int p : inputs_[i])
      from += (from.empty() ? "" : ", ") + (p < 0 ? std::string("input") : layers_[size_t(p)]->name());
    std::snprintf(line, sizeof line, format, l.name().c_str(), l.type().c_str(),
                  l.output_shape().batched_str().c_str(),
                  with_thousands(layer_num_params(i) + layer_buffers[i]).c_str(), from.c_str());
    out += line;
  }
  out += double_rule + "\n";
  out += "Total params: " + with_thousands(num_params() + buffers) + "\n";
  out += "Trainable params: " + with_thousands(num_params()) + "\n";
  out += "Non-trainable params: " + with_thousands(buffers) + "\n";
  out += rule + "\n";
  return out;
}

YAML::Node Model::describe_layers() const {
  YAML::Node list(YAML::NodeType::Sequence);
  for (const auto& l : layers_) {
    YAML::Node n;
    n["type"] = l->type();
    n["name"] = l->name();
    const size_t i = list.size();
    // A stack's default (the previous layer) is left implicit, so a plain list reads as written.
    if (inputs_[i] != std::vector<int>{int(i) - 1})
      for (int p : inputs_[i])
        n["inputs"].push_back(p < 0 ? std::string("input") : layers_[size_t(p)]->name());
    l->describe(n);
    list.push_back(n);
  }
  return list;
}

}  // namespace trainer
