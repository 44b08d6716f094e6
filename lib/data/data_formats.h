// The data formats a source section may name (data.train.format), registered in one table as
// layers are: each entry's keys, the keys that name its files, what it knows about its classes and
// its bytes' scale, and its reader. Config validation (data_source_keys), the pre-read file probe
// (lib/data/input_files.h), the run's recorded absolute paths (describe_source), the scale's
// default and load_source (lib/data/data_sources.h) all read this table, so a new format is its
// reader in datasets/, one entry in data_formats.cc and its test.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/image_loader.h"
#include "lib/data/data_sources.h"
#include "lib/keys/key_spec.h"

namespace trainer {

// What a reader is given: the section's validated keys and the run's context.
struct SourceRead {
  const KeyValues& keys;
  const std::string& path;   // "data.train", for messages
  const SourceContext& ctx;  // model.input_shape, data.num_classes, the loss's targets, ...
  int classes;               // labels must be below it (a loss on values: no bound, 1 << 30)
  int64_t limit;             // the `limit` key, 0 when the format has none or it is 0
  YAML::Node* learned;       // receives the keys a reader learned (a CSV's encoding); may be null
};

struct DataFormat {
  std::string name;
  std::string doc;  // one line (trainer help, docs/config.md)
  KeySpecs keys;
  // Keys naming files (a string, or a list of strings): probed before anything is read (a
  // missing file fails fast, naming its key's line) and recorded as absolute paths in a run's
  // config.yaml. `folder`: `path` names a folder instead, probed as one.
  std::vector<std::string> file_keys;
  bool folder = false;
  bool discovers_classes = false;  // data.num_classes may be left out
  // data.normalize.scale's default for this source's samples; nullopt: decided by the samples
  // the reader gives (1/255 for uint8). npy reads its file's header.
  std::function<std::optional<double>(const KeyValues&)> scale;
  std::function<Dataset(const SourceRead&)> read;
  // A format with a `context` key (text, tokens) gives a label per position of each sample, as
  // many as `context` says: the loss then runs over every position (section_positions).
  bool per_position() const;
};

// Every format, in the order `trainer help` and the docs list them.
const std::vector<DataFormat>& data_formats();
// The entry named `name`, or null.
const DataFormat* find_data_format(const std::string& name);
// The entry a source section names, the default one (kDefaultDataFormat) when it names none; null
// for a section that is not a mapping, or a format that is not a string or not in the table
// (which config validation refuses).
const DataFormat* section_format(const YAML::Node& section);

// The labels a sample of this source section has: its `context` as given or by default for a
// per_position() format, else 1. A malformed value counts as the default here; validating the
// section names it.
int64_t section_positions(const YAML::Node& section);

// How a section of format image_folder or image_list decodes and sizes its images.
ImageLoadOptions image_options(const KeyValues& s, const std::string& path, const Shape& input_shape);

}  // namespace trainer
