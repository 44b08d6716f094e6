#include "lib/config/config.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "lib/config/class_names.h"
#include "lib/config/config_keys.h"
#include "lib/config/device_section.h"
#include "lib/core/augment_formula.h"
#include "lib/core/error.h"
#include "lib/data/data_formats.h"
#include "lib/data/data_sources.h"
#include "lib/keys/node_reader.h"
#include "lib/keys/yaml_loader.h"

namespace trainer {

std::string MetricSpec::label() const {
  if (type == "top_k_accuracy") return "top" + std::to_string(k) + "_accuracy";
  return type;
}

// A copy without source positions: values from --set must not claim a line of the file.
static YAML::Node clone_unmarked(const YAML::Node& n) {
  if (n.IsScalar()) return YAML::Node(n.Scalar());
  if (n.IsSequence()) {
    YAML::Node out(YAML::NodeType::Sequence);
    for (const auto& item : n) out.push_back(clone_unmarked(item));
    return out;
  }
  if (n.IsMap()) {
    YAML::Node out(YAML::NodeType::Map);
    for (auto it = n.begin(); it != n.end(); ++it) out[it->first.Scalar()] = clone_unmarked(it->second);
    return out;
  }
  return YAML::Node(YAML::NodeType::Null);
}

// The assignment as it may appear in a message: at most 200 bytes of it.
static std::string quoted_override(const std::string& assignment) {
  return "--set " + (assignment.size() <= 200 ? assignment : assignment.substr(0, 200) + "...");
}

// Whether `target` is held in more than one place of the tree: through an alias (*name), or a
// merge key (<<) whose values the loader shares with the merged mapping. yaml-cpp writes through
// such a node to every place, so --set copies it first. (Node::operator= writes through as well:
// the walk rebinds with reset().) The walk is bounded as the loader bounds
// a config's walk with its aliases followed (kMaxConfigNodes).
static bool held_elsewhere(const YAML::Node& root, const YAML::Node& target) {
  int64_t places = 0, visited = 0;
  std::vector<YAML::Node> todo{root};
  while (!todo.empty() && places < 2 && ++visited <= kMaxConfigNodes) {
    const YAML::Node n = todo.back();
    todo.pop_back();
    const auto look = [&](const YAML::Node& child) {
      if (child.is(target))
        ++places;
      else if (child.IsMap() || child.IsSequence())
        todo.push_back(child);
    };
    if (n.IsSequence())
      for (const auto& item : n) look(item);
    else if (n.IsMap())
      for (auto it = n.begin(); it != n.end(); ++it) look(it->second);
  }
  return places >= 2;
}

// A new list or mapping holding the same items (which keep their positions in the file).
static YAML::Node shallow_copy(const YAML::Node& n) {
  if (n.IsSequence()) {
    YAML::Node out(YAML::NodeType::Sequence);
    for (const auto& item : n) out.push_back(item);
    return out;
  }
  if (n.IsMap()) {
    YAML::Node out(YAML::NodeType::Map);
    for (auto it = n.begin(); it != n.end(); ++it) out[it->first] = it->second;
    return out;
  }
  return clone_unmarked(n);
}

// The child `part` of a list or mapping, as a handle that shares the tree's memory holder.
static YAML::Node child_of(YAML::Node node, const std::string& part) {
  return node.IsSequence() ? YAML::Node(node[size_t(std::stoul(part))]) : YAML::Node(node[part]);
}

// Sets the child parts[i] of chain[i] to `value` without writing through a shared node: a
// mapping's key is rebound; a list's item is assigned in place when the item is held nowhere
// else, otherwise the list is rebuilt around the new item and rebound in its own parent.
// chain[k] is the node at parts[0..k), each reached from the root: yaml-cpp keeps a tree's nodes
// in a memory that handles share through one holder, and a handle with a holder of its own
// (a new node's) may point at a memory that the root no longer reaches after a merge, so nodes
// created through it would be freed with it. The caller walks the chain again afterwards.
static void put_child(const YAML::Node& root, const std::vector<YAML::Node>& chain,
                      const std::vector<std::string>& parts, size_t i, const YAML::Node& value) {
  YAML::Node parent = chain[i];
  if (!parent.IsSequence()) {  // a mapping, or a null item (`- ` or `- # comment`) that becomes one
    parent.remove(parts[i]);
    parent[parts[i]] = value;
    return;
  }
  const size_t idx = size_t(std::stoul(parts[i]));
  if (!held_elsewhere(root, parent[idx])) {
    parent[idx] = value;
    return;
  }
  YAML::Node rebuilt(YAML::NodeType::Sequence);
  for (size_t k = 0; k < parent.size(); ++k) rebuilt.push_back(k == idx ? value : YAML::Node(parent[k]));
  put_child(root, chain, parts, i - 1, rebuilt);  // i > 0: the root is a mapping
}

void apply_override(YAML::Node& root, const std::string& assignment) {
  const std::string flag = quoted_override(assignment);
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UsageError(flag + ": expected dotted.key=value, e.g. --set optimizer.lr=0.01");
  const std::string key = assignment.substr(0, eq);
  // Split on every dot: "a..b", ".a" and "a." have an empty segment (getline would drop a last one).
  std::vector<std::string> parts;
  for (size_t begin = 0;;) {
    const size_t dot = key.find('.', begin);
    parts.push_back(key.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin));
    if (parts.back().empty())
      throw UsageError(flag + ": empty key segment in '" + key +
                       "'; keys are separated by single dots, "
                       "e.g. optimizer.lr or model.layers.0.units");
    if (dot == std::string::npos) break;
    begin = dot + 1;
    // A key is a path into the config, which nests at most kMaxConfigDepth levels: a deeper one
    // would build a tree that every later walk of the config (recursive) could not get through.
    if (parts.size() >= size_t(kMaxConfigDepth))
      throw ConfigError(flag + ": the key has more than " + std::to_string(kMaxConfigDepth) +
                        " dotted segments; a config nests at most " + std::to_string(kMaxConfigDepth) +
                        " levels deep, and its keys need a handful");
  }
  // The value is YAML under the same bounds as a config file; "--set k=" sets k to null (its default).
  const YAML::Node value = clone_unmarked(load_yaml_document(assignment.substr(eq + 1), "--set " + key));
  // chain[i] is the node at parts[0..i) (chain[0] the root); the walk copies on write, so that
  // a node an alias (*name) or a merge key (<<) shares with other places is never written through.
  std::vector<YAML::Node> chain{root};
  const auto walk_again = [&](size_t levels) {
    chain.resize(1);
    for (size_t k = 0; k < levels; ++k) chain.push_back(child_of(chain.back(), parts[k]));
  };
  std::string walked;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    const bool last = i + 1 == parts.size();
    const YAML::Node cur = chain.back();
    if (cur.IsSequence()) {
      const size_t n = cur.size();
      const std::string range = n == 0 ? "it is empty" : "allowed: 0 to " + std::to_string(n - 1);
      if (p.find_first_not_of("0123456789") != std::string::npos)
        throw ConfigError(flag + ": '" + walked + "' is a list of " + std::to_string(n) + " items; '" + p +
                          "' is not an index in it (" + range + ")");
      // digits only; more than 9 of them are out of range of any list we accept
      if (p.size() > 9 || size_t(std::stoul(p)) >= n)
        throw ConfigError(flag + ": '" + walked + "' is a list of " + std::to_string(n) + " items; index " +
                          (p.size() > 24 ? p.substr(0, 24) + "..." : p) + " is out of range (" + range + ")");
    } else if (cur.IsScalar()) {
      throw ConfigError(flag + ": '" + walked + "' is a value, not a section");
    }
    if (last) {
      put_child(root, chain, parts, i, value);
      return;
    }
    const YAML::Node next = child_of(cur, p);
    if (!cur.IsSequence() && (!next || next.IsNull())) {
      put_child(root, chain, parts, i, YAML::Node(YAML::NodeType::Map));
      walk_again(i);
    } else if (held_elsewhere(root, next)) {
      put_child(root, chain, parts, i, shallow_copy(next));
      walk_again(i);
    }
    chain.push_back(child_of(chain.back(), p));
    walked += (walked.empty() ? "" : ".") + p;
  }
}

static void read_model(Config& c, NodeReader& r) {
  NodeReader mr(r.child("model"), "model", c.file);
  const KeyValues v = read_keys(mr, model_keys());
  c.input_shape = Shape(v.integers("input_shape"));
  if (c.input_shape.rank() == 0)
    mr.fail("input_shape", "is empty: give the shape of one sample, e.g. input_shape: [1, 28, 28] or [784]");
  if (!c.input_shape.fits())
    mr.fail("input_shape", c.input_shape.str() + " has " + c.input_shape.numel_str() +
                               " elements per sample; one tensor may hold at most " +
                               with_thousands(kMaxTensorElements) + " (2^31 - 1)");
  const std::string init = v.string("init");
  c.init = init == "torch" ? InitScheme::torch : init == "gpt2" ? InitScheme::gpt2 : InitScheme::keras;
  c.layers = mr.child("layers");
  if (!c.layers.IsSequence() || c.layers.size() == 0)
    mr.fail("layers", key_named(model_keys(), "layers").required);
  c.blocks = mr.child("blocks");
  // Model parallelism (lib/model/pipeline.h): the layers where stage 2, 3, ... begin. Checked
  // against the layer names where the model is built; recorded only when given.
  if (v.has("stages")) c.stages = v.strings("stages");
  read_layer_list(c.layers, c.file, c.blocks);  // every layer's keys, as declared by its type (lib/registry)
  c.resolved["model"] = mr.resolved();
}

static void read_loss(Config& c, NodeReader& r) {
  YAML::Node n = r.child("loss");
  // yaml-cpp's Node::operator= writes through to the referenced node; reset() rebinds.
  YAML::Node section;
  section.reset(n);
  if (present(n) && n.IsScalar()) {  // "loss: nll" shortcut
    YAML::Node m(YAML::NodeType::Map);
    m["type"] = n;  // the scalar itself: an error names its line
    section.reset(m);
  }
  NodeReader lr(section, "loss", c.file);
  c.loss_config = read_loss_config(lr);
  // A source of sequences with a label per position (format text, tokens): the loss runs over
  // every position. Read before the metrics, which depend on the task.
  const YAML::Node data = r.child("data");
  if (data.IsMap() && data["train"]) c.loss_config.positions = section_positions(data["train"]);
  lr.finish();
  c.resolved["loss"] = lr.resolved();
}

static void read_metrics(Config& c, NodeReader& r) {
  YAML::Node n = r.child("metrics");
  // The metrics that fit the loss's task (binary and multi-label share theirs).
  const Task task = c.loss_config.task(1);
  const std::vector<std::string>& allowed = task_metrics(task);
  KeyVariants variants;  // the declared metrics of this task, in the task's order
  for (const std::string& name : allowed)
    for (const KeyVariant& v : metric_keys())
      if (v.name == name) variants.push_back(v);
  if (present(n) && !n.IsSequence())
    r.fail("metrics", "expected a list, e.g. metrics: [accuracy, {type: top_k_accuracy, k: 5}]");
  // The task's defaults go the way a given list goes, so that they resolve as it does: a run's
  // config.yaml read back (fit --resume RUN) then gives the same config, and the same metadata.
  YAML::Node list = n;
  if (!present(n)) {
    list = YAML::Node(YAML::NodeType::Sequence);
    for (const std::string& m : default_task_metrics(task)) list.push_back(m);
  }
  YAML::Node out(YAML::NodeType::Sequence);
  for (size_t i = 0; i < list.size(); ++i) {
    YAML::Node item;
    item.reset(list[i]);
    if (item.IsScalar()) {  // "accuracy" shortcut
      YAML::Node m(YAML::NodeType::Map);
      m["type"] = item;
      item.reset(m);
    }
    NodeReader mr(item, "metrics." + std::to_string(i), c.file);
    const KeyValues v = read_variant(mr, "type", kDefaultMetric, variants);
    MetricSpec s;
    s.type = v.string("type");
    if (s.type == "top_k_accuracy") s.k = v.integer("k");
    c.metrics.push_back(s);
    out.push_back(mr.resolved());
  }
  c.resolved["metrics"] = out;
}

// top_k_accuracy's k against data.num_classes (read after the metrics): with k above the class
// count the metric cannot mean anything (Keras and torchmetrics take it without a word).
static void check_top_k(const Config& c, NodeReader& r) {
  const YAML::Node list = r.child("metrics");
  for (size_t i = 0; i < c.metrics.size(); ++i) {
    const MetricSpec& m = c.metrics[i];
    if (m.type != "top_k_accuracy" || m.k <= c.data.num_classes) continue;
    YAML::Node item;
    if (present(list) && list.IsSequence() && i < list.size()) item.reset(list[i]);
    const bool given = item.IsMap() && present(item["k"]);
    throw ConfigError(node_location(c.file, given ? item["k"] : item) + ": metrics." + std::to_string(i) +
                      ".k: " + std::to_string(m.k) + (given ? "" : " (the default)") +
                      " is more than data.num_classes " + std::to_string(c.data.num_classes) +
                      "; top_k_accuracy needs k at most the number of classes");
  }
}

// data.split: {fraction, shuffle, stratify}, or its short form data.validation_split: f. The
// resolved config records the long form only.
static YAML::Node read_split(Config& c, NodeReader& dr, const KeyValues& d) {
  DataConfig& dc = c.data;
  const bool short_form = dr.has("validation_split");
  if (short_form && dr.has("split"))
    dr.fail("validation_split",
            "cannot be combined with data.split (validation_split: f is its short form, split: {fraction: "
            "f}); give one of them (--set data.split.fraction=f changes a split that a run recorded)");
  const char* key = short_form ? "validation_split" : "split";
  NodeReader sr(dr.child("split"), "data.split", c.file);
  const KeyValues s = read_keys(sr, split_keys());
  dc.validation_split = short_form ? d.number("validation_split") : s.number("fraction");
  dc.split_shuffle = s.boolean("shuffle");
  dc.split_stratify = s.has("stratify") ? s.boolean("stratify") : dc.split_shuffle;
  if (dc.split_stratify && !dc.split_shuffle)
    sr.fail("stratify",
            "true needs shuffle: true (the last rows of the file cannot be chosen per class); set stratify: "
            "false for Keras' last-rows split");
  if (dc.validation_split > 0 && present(dc.validation))
    dr.fail(key, "cannot be combined with an explicit data.validation source");
  YAML::Node out(YAML::NodeType::Map);
  out["fraction"] = dc.validation_split;
  out["shuffle"] = dc.split_shuffle;
  out["stratify"] = dc.split_stratify;
  return out;
}

static void read_data(Config& c, NodeReader& r) {
  NodeReader dr(r.child("data"), "data", c.file);
  DataConfig& dc = c.data;
  // Losses on float targets have no classes: num_classes (and class_names) name a multi-label
  // model's labels when given; the model's outputs say how many targets a sample has. A
  // classification loss needs two classes at least: the declared range, narrowed.
  const bool values = c.loss_config.on_values();
  KeySpecs keys = data_keys();
  for (KeySpec& k : keys)
    if (k.name == "num_classes" && !values) k.ilo = 2;
  const KeyValues d = read_keys(dr, keys);
  dc.train = dr.child("train");
  dc.validation = dr.child("validation");
  dc.num_classes = d.integer("num_classes");
  dc.class_names = read_class_names(dr, dc.num_classes);
  // Left out: the number of class_names, or what the training source discovers (a CSV's labels).
  if (dc.num_classes == 0) dc.num_classes = int64_t(dc.class_names.size());
  if (dc.num_classes == 0 && !values && !source_discovers_classes(dc.train))
    dr.fail("num_classes",
            "is required: the number of classes, e.g. num_classes: 10 (csv and image folder sources discover "
            "it)");
  // Standardized targets are a regression's: 0/1 targets and class labels have no scale to learn.
  if (d.boolean("normalize_targets") && (!values || c.loss_config.formula == ValueLoss::bce_logits))
    dr.fail("normalize_targets", "goes with a regression loss (mse, mae, huber); loss " + c.loss_config.type +
                                     " takes " + (values ? "0/1 targets" : "class labels"));
  if (dr.has("target_statistics")) {
    if (!d.boolean("normalize_targets"))
      dr.fail("target_statistics", "is learned with normalize_targets: true, which this config does not set");
    NodeReader m(dr.child("target_statistics"), "data.target_statistics", c.file);
    const size_t k = m.number_list("mean", {}, -3.4e38, 3.4e38).size();
    if (k == 0) m.fail("mean", "is required: one value per model output");
    if (m.number_list("std", {}, 1e-30, 3.4e38).size() != k) m.fail("std", "needs one value per mean");
    m.finish();
  }
  dc.batch_size = d.integer("batch_size");
  dc.shuffle = d.boolean("shuffle");
  dc.drop_last = d.boolean("drop_last");
  dc.loader_threads = d.integer("loader_threads");
  const YAML::Node split = read_split(c, dr, d);
  NodeReader nr(dr.child("normalize"), "data.normalize", c.file);
  dc.scale_given = nr.has("scale");
  dc.scale_known = dc.scale_given;
  const KeyValues n = read_keys(nr, normalize_keys());
  dc.normalize.scale = n.number("scale");
  dc.normalize.mean = n.numbers("mean");
  dc.normalize.std = n.numbers("std");
  YAML::Node aug = dr.child("augment");
  NodeReader ar(aug, "data.augment", c.file);
  const KeyValues a = read_keys(ar, augment_keys());
  dc.augment.crop_padding = a.integer("crop_padding");
  dc.augment.flip = a.string("flip") == "horizontal";
  YAML::Node rrc_resolved;
  if (ar.has("random_resized_crop")) {
    YAML::Node rrc = ar.child("random_resized_crop");
    if (rrc.IsMap()) {
      NodeReader rr(rrc, "data.augment.random_resized_crop", c.file);
      const KeyValues v = read_keys(rr, random_resized_crop_keys());
      const std::vector<double> scale = v.numbers("scale"), ratio = v.numbers("ratio");
      if (scale.size() != 2 || scale[0] > scale[1])
        rr.fail("scale", "expected [low, high] area fractions with low <= high, e.g. scale: [0.08, 1.0]");
      if (ratio.size() != 2 || ratio[0] > ratio[1])
        rr.fail("ratio", "expected [low, high] aspect ratios with low <= high, e.g. ratio: [0.75, 1.333]");
      dc.augment.random_resized_crop = true;
      dc.augment.rrc_scale[0] = scale[0], dc.augment.rrc_scale[1] = scale[1];
      dc.augment.rrc_ratio[0] = ratio[0], dc.augment.rrc_ratio[1] = ratio[1];
      rrc_resolved = rr.resolved();
    } else {
      dc.augment.random_resized_crop = ar.boolean("random_resized_crop", false);
    }
    if (dc.augment.random_resized_crop && c.input_shape.rank() != 3)
      ar.fail("random_resized_crop",
              "needs image inputs (channels, height, width); model.input_shape is " + c.input_shape.str());
  }
  if (dc.augment.active()) {
    const char* key = ar.has("crop_padding") ? "crop_padding" : "flip";
    if (c.input_shape.rank() != 3)
      ar.fail(key,
              "needs image inputs (channels, height, width); model.input_shape is " + c.input_shape.str());
    if (c.input_shape[0] > kMaxAugmentChannels)
      ar.fail(key, "works on images of at most " + std::to_string(kMaxAugmentChannels) +
                       " channels; model.input_shape is " + c.input_shape.str());
  }
  c.resolved["data"] = dr.resolved();
  c.resolved["data"].remove("validation_split");
  c.resolved["data"]["split"] = split;
  if (dc.num_classes > 0)
    c.resolved["data"]["num_classes"] = dc.num_classes;
  else
    c.resolved["data"].remove("num_classes");  // discovered: recorded by the run (record_learned)
  if (present(aug)) c.resolved["data"]["augment"] = ar.resolved();
  if (rrc_resolved.IsMap()) c.resolved["data"]["augment"]["random_resized_crop"] = rrc_resolved;
  // Each source's keys, as declared by its format (lib/data/data_sources.cc); no file is read.
  c.resolved["data"]["train"] = describe_source(dc.train, "data.train", c.file);
  if (present(dc.validation))
    c.resolved["data"]["validation"] = describe_source(dc.validation, "data.validation", c.file);
  c.resolved["data"]["normalize"] = nr.resolved();
  // The scale that applies, recorded: a run directory's config (and --print-config) must say what
  // training did, and eval, predict and --resume then scale every input, whatever its file type,
  // by that value (lib/train/session.h, normalization_for).
  if (!dc.scale_given) {
    const std::optional<double> scale = default_scale(dc.train, "data.train", c.file);
    if (scale) {
      dc.normalize.scale = *scale;
      dc.scale_known = true;
      c.resolved["data"]["normalize"]["scale"] = *scale;
    }
  }
}

MonitorMode default_mode(const std::string& monitor) {
  const std::string tail = "loss";
  const bool is_loss =
      monitor.size() >= tail.size() && monitor.compare(monitor.size() - tail.size(), tail.size(), tail) == 0;
  return is_loss ? MonitorMode::min : MonitorMode::max;
}

bool Config::has_validation() const { return present(data.validation) || data.validation_split > 0; }

std::vector<std::string> Config::monitors() const {
  std::vector<std::string> names{"loss"};
  for (const auto& m : metrics) names.push_back(m.label());
  if (has_validation()) {
    const size_t n = names.size();
    for (size_t i = 0; i < n; ++i) names.push_back("val_" + names[i]);
  }
  return names;
}

static std::string join_names(const std::vector<std::string>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s;
}

// A monitor key: "auto" becomes `fallback`; anything else must be a known metric name.
static std::string read_monitor(const Config& c, NodeReader& r, const std::string& key,
                                const std::string& fallback, bool allow_none = false) {
  std::string v = r.string(key, "auto");
  if (v == "auto") v = fallback;
  if (allow_none && v == "none") return v;
  const auto names = c.monitors();
  if (std::find(names.begin(), names.end(), v) == names.end()) {
    std::string hint = v.rfind("val_", 0) == 0 && !c.has_validation()
                           ? " (there is no validation data: set data.validation or data.validation_split)"
                           : "";
    std::string near = closest_match(v, names);
    r.fail(key, "'" + v + "' is not a metric of this run" + hint +
                    (near.empty() ? "" : "; did you mean '" + near + "'?") +
                    "; allowed: " + join_names(names) + (allow_none ? ", none" : "") + ", auto");
  }
  r.resolved()[key] = v;
  return v;
}

// The default monitor: validation loss when there is validation data, else the training loss.
static std::string default_monitor(const Config& c) { return c.has_validation() ? "val_loss" : "loss"; }

static void read_training_controls(Config& c, NodeReader& r) {
  {
    NodeReader e(r.child("early_stopping"), "early_stopping", c.file);
    const KeyValues v = read_keys(e, early_stopping_keys());
    EarlyStoppingConfig& es = c.early_stopping;
    es.enabled = present(r.child("early_stopping")) && v.boolean("enabled");
    if (es.enabled) {
      es.monitor = read_monitor(c, e, "monitor", default_monitor(c));
      es.mode = default_mode(es.monitor);
      es.patience = v.integer("patience");
      es.min_delta = v.number("min_delta");
      es.restore_best = v.boolean("restore_best");
      c.resolved["early_stopping"] = e.resolved();
    }
  }
  {
    NodeReader k(r.child("checkpoint"), "checkpoint", c.file);
    const KeyValues v = read_keys(k, checkpoint_keys());
    CheckpointConfig& ck = c.checkpoint;
    ck.every = v.integer("every");
    ck.keep_last = v.integer("keep_last");
    // best: follows early stopping's monitor, else the validation accuracy (or loss).
    std::string fallback = c.early_stopping.enabled ? c.early_stopping.monitor : default_monitor(c);
    if (!c.early_stopping.enabled && c.has_validation())
      for (const auto& m : c.metrics)
        if (m.type == "accuracy") fallback = "val_accuracy";
    ck.best = read_monitor(c, k, "best", fallback, true);
    c.resolved["checkpoint"] = k.resolved();
  }
  {
    YAML::Node n = r.child("schedule");
    YAML::Node section;
    section.reset(n);
    if (present(n) && n.IsScalar()) {  // "schedule: cosine" shortcut
      YAML::Node m(YAML::NodeType::Map);
      m["type"] = n;
      section.reset(m);
    }
    NodeReader s(section, "schedule", c.file);
    const KeyValues v = read_variant(s, "type", kDefaultSchedule, schedule_keys());
    ScheduleConfig& sc = c.schedule;
    sc.type = v.string("type");
    sc.warmup_steps = v.integer("warmup_steps");
    sc.warmup_epochs = v.integer("warmup_epochs");
    if (sc.warmup_steps > 0 && sc.warmup_epochs > 0)
      s.fail("warmup_epochs", "cannot be combined with warmup_steps; give one of them");
    if (sc.type == "step") {
      sc.step_size = v.integer("step_size");
      sc.gamma = v.number("gamma");
    } else if (sc.type == "exponential") {
      sc.gamma = v.number("gamma");
    } else if (sc.type == "cosine") {
      sc.min_lr = v.number("min_lr");
    } else if (sc.type == "reduce_on_plateau") {
      sc.monitor = read_monitor(c, s, "monitor", default_monitor(c));
      sc.mode = default_mode(sc.monitor);
      sc.factor = v.number("factor");
      sc.patience = v.integer("patience");
      sc.min_delta = v.number("min_delta");
      sc.cooldown = v.integer("cooldown");
      sc.min_lr = v.number("min_lr");
    }
    c.resolved["schedule"] = s.resolved();
  }
}

// train.loss_scale: auto | dynamic | none | a number (a fixed scale); loss_scale_init and
// loss_scale_growth_interval tune the dynamic scale (torch.amp.GradScaler's init_scale and
// growth_interval; its growth 2 and backoff 0.5 are kept).
static void read_loss_scale(LossScaleConfig& ls, NodeReader& t, const KeyValues& v) {
  using Mode = LossScaleConfig::Mode;
  const std::string s = v.string("loss_scale");  // declared: auto | dynamic | none | a number
  if (s == "auto" || s == "dynamic" || s == "none") {
    ls.mode = s == "auto" ? Mode::automatic : s == "dynamic" ? Mode::dynamic : Mode::none;
    ls.init = v.number("loss_scale_init");
  } else {
    ls.mode = Mode::fixed;
    ls.init = std::strtod(s.c_str(), nullptr);
    if (t.has("loss_scale_init"))
      t.fail("loss_scale_init",
             "goes with loss_scale: dynamic (or auto); a fixed loss_scale is its own value");
    t.resolved().remove("loss_scale_init");
  }
  ls.growth_interval = v.integer("loss_scale_growth_interval");
}

static Config parse_document(YAML::Node root, const std::string& file,
                             const std::vector<std::string>& overrides) {
  if (!root.IsMap())
    throw ConfigError(node_location(file, root) +
                      ": the config must be a mapping of sections "
                      "(model:, data:, optimizer:, ...), got " +
                      (root.IsSequence() ? "a list" : "a single value"));
  for (const auto& o : overrides) {
    normalize_device(root);  // so that --set device.memory_limit=N works on "device: gpu:0" too
    apply_override(root, o);
  }
  Config c;
  c.file = file;
  c.root = root;
  c.resolved = YAML::Node(YAML::NodeType::Map);
  NodeReader r(root, "", file);
  // The top-level keys first: model and data are required, an unknown section is named before
  // anything inside the known ones; each section's reader then checks its own keys.
  const KeyValues top = read_keys(r, root_keys());
  read_model(c, r);
  read_loss(c, r);
  {
    NodeReader o(r.child("optimizer"), "optimizer", file);
    c.optimizer = read_optimizer(o);
    o.finish();
    c.resolved["optimizer"] = o.resolved();
  }
  read_metrics(c, r);
  read_data(c, r);
  check_top_k(c, r);
  {
    NodeReader t(r.child("train"), "train", file);
    const KeyValues v = read_keys(t, train_keys());
    c.epochs = v.integer("epochs");
    c.seed = uint64_t(v.integer("seed"));
    c.deterministic = v.boolean("deterministic");
    c.on_nan_skip = v.string("on_nan") == "skip";
    c.divergence_stop = v.string("divergence") == "stop";
    read_loss_scale(c.loss_scale, t, v);
    c.resolved["train"] = t.resolved();
  }
  read_device(c, r);
  c.math = parse_math(top.string("math"));
  c.resolved["math"] = math_name(c.math);
  c.low_precision_min_mflops = top.number("low_precision_min_mflops");
  c.resolved["low_precision_min_mflops"] = c.low_precision_min_mflops;
  c.threads = int(top.integer("threads"));
  c.resolved["threads"] = c.threads;
  read_training_controls(c, r);
  c.clip_grad_norm = top.number("clip_grad_norm");
  c.resolved["clip_grad_norm"] = c.clip_grad_norm;
  if (present(r.child("pipeline"))) {  // recorded only when given, as model.stages
    NodeReader p(r.child("pipeline"), "pipeline", file);
    c.micro_batches = read_keys(p, pipeline_keys()).integer("micro_batches");
    c.resolved["pipeline"] = p.resolved();
  }
  return c;
}

Config parse_config(const std::string& text, const std::string& name,
                    const std::vector<std::string>& overrides) {
  YAML::Node root = load_yaml_document(text, name);
  if (!root || root.IsNull())
    throw ConfigError(name +
                      ": the config file is empty; it needs at least model: and data: sections "
                      "(see docs/config-guide.md)");
  return parse_document(root, name, overrides);
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  return parse_config(read_config_file(path), path, overrides);
}

}  // namespace trainer
