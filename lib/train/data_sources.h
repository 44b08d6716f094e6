// Turns a config data source section into a Dataset through the readers in datasets/.
//   format: idx | cifar10 | npy | csv | sequences | disc | random
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "datasets/dataset.h"

namespace trainer {

struct KeyVariant;
using KeyVariants = std::vector<KeyVariant>;

// Every data `format` with the keys it declares (lib/config/key_spec.h); load_config() validates
// data.train and data.validation with them.
const KeyVariants& data_source_keys();

// path: "data.train"; file: the config file, for messages. Validates every key of the section,
// then reads (throws ConfigError for bad keys, DataError for bad files).
// any_image_size: images (C, H, W) of the input's channels and any height and width are accepted
// (the training data under data.augment.random_resized_crop). target: what the loss takes
// (datasets/dataset.h). Readers give class indices; for a loss on values they become values
// (to_value_targets), and the targets are checked against the loss.
Dataset load_source(const YAML::Node& section, const std::string& path, const std::string& file,
                    int num_classes, const Shape& input_shape, const TargetLayout& target = {},
                    bool any_image_size = false);

// Class indices as the values a loss on float targets takes: with width 1, the index itself
// (0/1 labels for a binary loss, whole-number regression targets); with width K, a one-hot row
// (a multi-label loss's multi-hot rows, one label each). Data that has values already is left
// as it is. Then checks the targets: their width against the model's outputs, every value
// finite, and 0 or 1 for a binary loss (DataError naming the sample and the value).
void to_value_targets(Dataset& d, const TargetLayout& target, const std::string& path);

// Checks the keys of a source section without reading any file (for --print-config).
YAML::Node describe_source(const YAML::Node& section, const std::string& path, const std::string& file);

}  // namespace trainer
