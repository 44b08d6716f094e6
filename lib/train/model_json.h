// The model as data, for other tools (scripts/torch_peer.py builds the same network in PyTorch
// from it): `trainer summary CONFIG --json`.
//   {"input_shape": [C, H, W], "total_params": trainable + non-trainable (as Keras counts them),
//    "trainable_params": N, "non_trainable_params": buffer elements (batchnorm's running statistics),
//    "layers": [{"name", "type", "inputs": [names, "input" for the model's input],
//                "output_shape": [...], "params": [{"name": "layer1.0.conv1.weight", "shape": [...]}],
//                "buffers": [...], "hyper": {resolved hyper-parameters, as describe() writes them}}],
//    "config": {the resolved config}}
// Layers are in run order, blocks and macros expanded; tensor names are the checkpoint's.
#pragma once

#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "lib/config/config.h"
#include "lib/model/model.h"

namespace trainer {

nlohmann::json model_json(const Config& cfg, const Model& model);

// YAML -> JSON: maps, sequences, and scalars as integers, numbers, booleans or strings.
nlohmann::json yaml_to_json(const YAML::Node& n);

}  // namespace trainer
