// Bounded, strict YAML loading for configs and --set values.
//
// A config comes from the user, so nothing about it is trusted before it is checked:
//   - the file must be a regular file (a FIFO, a directory or /dev/zero is refused before any
//     read, never waited on) of at most kMaxConfigBytes;
//   - the text must be UTF-8 without NUL bytes;
//   - the document may hold at most kMaxConfigNodes nodes nested at most kMaxConfigDepth deep,
//     counted while parsing, before yaml-cpp builds its (large) node tree; aliases may not
//     expand it past the same bounds;
//   - one document only, and no key twice in one mapping (yaml-cpp would silently keep one);
//   - merge keys (YAML 1.1's `<<: *defaults`, `<<: [*a, *b]`), which yaml-cpp 0.7 reads as an
//     ordinary key named "<<", are applied: keys written in the mapping win, then the merged
//     mappings in order; merged keys and values keep their positions in the file for messages.
// Every error is a ConfigError naming file:line:column; a path that cannot be read as a config
// file at all is a UsageError.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace trainer {

constexpr size_t kMaxConfigBytes = size_t(16) << 20;  // 16 MiB
constexpr int64_t kMaxConfigNodes = 100000;           // scalars, lists and mappings
constexpr int kMaxConfigDepth = 64;                   // nested lists and mappings

// The whole file, read without blocking on anything that is not a regular file.
std::string read_config_file(const std::string& path);

// Parses one YAML document under the limits above. name: the file (or "--set ...") for
// messages. Returns a null node for an empty document.
YAML::Node load_yaml_document(const std::string& text, const std::string& name);

// Throws ConfigError for the first mapping that holds a key twice, naming both positions; also
// bounds the tree as it would be walked with its aliases followed. path: the dotted prefix.
void check_duplicate_keys(const YAML::Node& node, const std::string& name, const std::string& path = "");

}  // namespace trainer
