// Turns a config data source section into a Dataset through the readers in datasets/, by the
// format table (lib/data/data_formats.h):
//   format: idx | cifar10 | npy | csv | sequences | image_folder | image_list | disc | random
//
// What a reader learns from the training data (a CSV's categories, standardize statistics and
// fill values: lib/data/csv_source.h) comes back as keys of the source's section; the run
// records them in data.train of its config.yaml, and any later read of that config (validation,
// eval, predict, resume) takes them from there instead of learning. Class names a reader
// discovers (Dataset::class_names) are recorded as data.class_names and data.num_classes
// (record_learned).
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/image_loader.h"
#include "datasets/split.h"

namespace trainer {

struct KeyVariant;
using KeyVariants = std::vector<KeyVariant>;

// Every data `format` with the keys it declares (lib/keys/key_spec.h); load_config() validates
// data.train and data.validation with them. The format when none is given: idx.
const KeyVariants& data_source_keys();
inline constexpr const char* kDefaultDataFormat = "idx";

// What the run knows before a source is read.
struct SourceContext {
  int num_classes = 0;                   // data.num_classes; 0: the source discovers the classes
  Shape input_shape;                     // model.input_shape
  std::vector<std::string> class_names;  // data.class_names
  TargetLayout target;                   // what the loss takes
  // The section whose learned keys apply (data.train, possibly with keys learned by this run),
  // or null: learn from this source.
  YAML::Node learned_from;
  // Set when the training data is split (data.validation_split): learned statistics (a CSV's
  // fill means and standardize) come from the rows the split gives training, never validation's.
  std::optional<SplitOptions> split;
  // Images (C, H, W) of the input's channels and any height and width are accepted (the training
  // data under data.augment.random_resized_crop).
  bool any_image_size = false;
};

// path: "data.train"; file: the config file, for messages. Validates every key of the section,
// then reads (throws ConfigError for bad keys, DataError for bad files). `learned` (optional)
// receives the keys the reader learned (an empty map when none). For a loss on values the
// readers' class indices become values (to_value_targets), and the targets are checked against
// the loss (ctx.target).
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

// For a section of format image_folder or image_list: fills *out with how its images are decoded
// and sized (predict reads its inputs the same way) and returns true; false for other formats.
bool image_source_options(const YAML::Node& section, const std::string& path, const std::string& file,
                          const Shape& input_shape, ImageLoadOptions* out);

// Class indices as the values a loss on float targets takes: with width 1, the index itself
// (0/1 labels for a binary loss, whole-number regression targets); with width K, a one-hot row
// (a multi-label loss's multi-hot rows, one label each). Data that has values already is left
// as it is. Then checks the targets: their width against the model's outputs, every value
// finite, and 0 or 1 for a binary loss (DataError naming the sample and the value).
void to_value_targets(Dataset& d, const TargetLayout& target, const std::string& path, bool warn = true);

// Checks the keys of a source section without reading any file (for --print-config). Paths of
// files are made absolute (relative ones are taken from the working directory, as the readers
// take them), so a run directory's config.yaml reads the same files from anywhere.
YAML::Node describe_source(const YAML::Node& section, const std::string& path, const std::string& file);

// data.normalize.scale's default for a training source: 1/255 for uint8 samples (idx, cifar10,
// uint8 npy: only the file's header is read), 1 for the others; nullopt when an npy file cannot be
// read (reading the data then says why).
std::optional<double> default_scale(const YAML::Node& section, const std::string& path,
                                    const std::string& file);

// "" when samples of shape `found` fit model.input_shape `input`, else what is wrong, with hints.
// Accepted: the same shape; the same number of values where one side is flat (a CSV row, an
// (N, F) array, input_shape [F]) or where the shapes differ only by axes of 1 ((28, 28) for
// [1, 28, 28]). Two shapes of one rank must be equal: an (N, H, W, C) array is not read as
// (N, C, H, W). nhwc_fix: how the user transposes channels-last images ("" when there is no way).
std::string sample_shape_mismatch(const Shape& found, const Shape& input, const std::string& nhwc_fix);

// For an input_shape that looks channels-last ([28, 28, 1], [32, 32, 3]): a hint naming the
// channels-first form; "" otherwise.
std::string channels_first_hint(const Shape& input_shape);

}  // namespace trainer
