// Turns a config data source section into a Dataset through the readers in datasets/.
//   format: idx | cifar10 | npy | csv | sequences | disc | random
//
// What a reader learns from the training data (a CSV's categories, standardize statistics and
// fill values: lib/train/csv_source.h) comes back as keys of the source's section; the run
// records them in data.train of its config.yaml, and any later read of that config (validation,
// eval, predict, resume) takes them from there instead of learning. Class names a reader
// discovers (Dataset::class_names) are recorded as data.class_names and data.num_classes
// (record_learned).
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

// What the run knows before a source is read.
struct SourceContext {
  int num_classes = 0;                   // data.num_classes; 0: the source discovers the classes
  Shape input_shape;                     // model.input_shape
  std::vector<std::string> class_names;  // data.class_names
  TargetLayout target;                   // what the loss takes
  // The section whose learned keys apply (data.train, possibly with keys learned by this run),
  // or null: learn from this source.
  YAML::Node learned_from;
  // Learned statistics come from the first part of the rows (a validation split's training part).
  double statistics_fraction = 1.0;
};

// path: "data.train"; file: the config file, for messages. Validates every key of the section,
// then reads (throws ConfigError for bad keys, DataError for bad files). `learned` (optional)
// receives the keys the reader learned (an empty map when none).
Dataset load_source(const YAML::Node& section, const std::string& path, const std::string& file,
                    const SourceContext& ctx, YAML::Node* learned = nullptr);

// True when a source of this section can discover its classes (data.num_classes may be left out).
bool source_discovers_classes(const YAML::Node& section);

// The samples of a file given to `trainer predict`, read with the column options and learned
// encoding of the training source `train` when it is a CSV (label columns optional), else as
// features only. Throws DataError naming the file.
Dataset load_predict_csv(const std::string& input, const YAML::Node& train, const std::string& file,
                         const SourceContext& ctx);

// Records in `data` (a resolved config's data section) what the training source learned: its
// learned keys in data.train, and the classes (data.class_names when there are names,
// data.num_classes) where the config left them out.
void record_learned(YAML::Node data, const YAML::Node& learned, const std::vector<std::string>& class_names,
                    int64_t num_classes);

// Checks the keys of a source section without reading any file (for --print-config).
YAML::Node describe_source(const YAML::Node& section, const std::string& path, const std::string& file);

}  // namespace trainer
