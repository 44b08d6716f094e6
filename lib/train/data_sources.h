// Turns a config data source section into a Dataset through the readers in datasets/.
//   format: idx | cifar10 | npy | csv | sequences | image_folder | image_list | disc | random
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/image_loader.h"

namespace trainer {

struct KeyVariant;
using KeyVariants = std::vector<KeyVariant>;

// Every data `format` with the keys it declares (lib/config/key_spec.h); load_config() validates
// data.train and data.validation with them.
const KeyVariants& data_source_keys();

// path: "data.train"; file: the config file, for messages. Validates every key of the section,
// then reads (throws ConfigError for bad keys, DataError for bad files). class_names:
// data.class_names, the mapping image folders and lists use instead of the names they find.
Dataset load_source(const YAML::Node& section, const std::string& path, const std::string& file,
                    int num_classes, const Shape& input_shape,
                    const std::vector<std::string>& class_names = {});

// For a section of format image_folder or image_list: fills *out with how its images are decoded
// and sized (predict reads its inputs the same way) and returns true; false for other formats.
bool image_source_options(const YAML::Node& section, const std::string& path, const std::string& file,
                          const Shape& input_shape, ImageLoadOptions* out);

// Checks the keys of a source section without reading any file (for --print-config).
YAML::Node describe_source(const YAML::Node& section, const std::string& path, const std::string& file);

}  // namespace trainer
