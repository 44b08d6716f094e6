// Floats written back as YAML (--print-config, a run's config.yaml, checkpoint metadata) in the
// shortest form that reads back as the same double: 0.9, not yaml-cpp's 0.90000000000000002.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

namespace trainer {

// The shortest decimal text that parses back to exactly `v` ("0.9", "1e-08", "0.001").
std::string shortest_float(double v);

// Rewrites, in place, every plain scalar of `node` that is a floating-point number spelled with
// more digits than it needs. Integers, strings and quoted scalars are left as they are.
void shorten_floats(YAML::Node node);

// A sequence of strings that shorten_floats leaves as they are (a category "1.50" stays "1.50",
// not 1.5): each is tagged "!", as a quoted scalar is, which the emitter does not write.
YAML::Node string_sequence(const std::vector<std::string>& items);

// YAML::Dump of a deep copy with shortened floats.
std::string dump_yaml(const YAML::Node& node);

}  // namespace trainer
