// `trainer help`: the layer types with their keys, one line each (`trainer help layers`), and the
// documentation of one key or section (`trainer help optimizer.nesterov`, `data.train.format`,
// `conv2d`, `conv2d.padding`), printed from the config tree (config_tree.h).
//
// Keys are written as in --set: dotted, list indexes optional (model.layers.0.units and
// model.layers.units are the same key), a variant's name may narrow the key (optimizer.sgd.lr), and
// a layer type stands for model.layers.TYPE. A key that is not one throws UsageError naming the
// closest key (did-you-mean), so the CLI exits 2.
#pragma once

#include <string>

namespace trainer {

std::string help_topics();  // what `trainer help` alone prints
std::string layer_listing();
std::string key_help(const std::string& key);

}  // namespace trainer
