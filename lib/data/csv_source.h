// The csv data format: its config keys, the CsvOptions they make, and what a CSV source learned
// from the training data written back as keys of its section (recorded in the run's config.yaml,
// where the next read takes them instead of learning again):
//   columns: 5                                   the training file's column count
//   categories: {color: [blue, green, red]}      per categorical feature column
//   standardize: {mean: [...], std: [...]}       per numeric feature (normalize: standardize)
//   missing: {fill: mean, values: [...]}         per numeric feature (missing.fill)
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>

#include "datasets/csv_reader.h"
#include "lib/keys/key_spec.h"

namespace trainer {

struct SourceContext;

KeySpecs csv_source_keys();

// Checks what the key specs cannot (the delimiter, missing, the learned mappings); the same
// ConfigError at the key's file:line:column.
void check_csv_section(const KeyValues& s, const YAML::Node& section, const std::string& path,
                       const std::string& file);

// The reader's options for section `path`; `learned_from`: the section whose learned keys apply
// (data.train's), or null to learn.
CsvOptions csv_options(const KeyValues& s, const YAML::Node& learned_from, const SourceContext& ctx);

// The learned keys (above) of an encoding.
YAML::Node csv_learned_keys(const CsvEncoding& e, const CsvOptions& o);

}  // namespace trainer
