// NodeReader: typed, validated access to one YAML mapping of the config.
//
// Every getter records the key as known; finish() then rejects any key that was never asked for,
// naming file:line:column and the closest known key. Every error names the full dotted key
// ("optimizer.lr"), the offending value and what is allowed. Values that came from --set have no
// position in the file; their errors say "--set" instead.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace trainer {

// True when a YAML node holds something (yaml-cpp's Node() is "defined" yet null).
inline bool present(const YAML::Node& n) { return n && !n.IsNull(); }

// Where a node came from, for messages: "configs/x.yaml:12:5" or "--set".
std::string node_location(const std::string& file, const YAML::Node& node);
// Levenshtein-closest candidate, or "" when nothing is reasonably close.
std::string closest_match(const std::string& word, const std::vector<std::string>& candidates);

class NodeReader {
 public:
  // node: a YAML map (or null/undefined, treated as empty). path: dotted prefix, e.g. "optimizer".
  NodeReader(const YAML::Node& node, std::string path, std::string file);

  bool has(const std::string& key) const;
  double number(const std::string& key, double def, double lo, double hi);
  int64_t integer(const std::string& key, int64_t def, int64_t lo, int64_t hi);
  bool boolean(const std::string& key, bool def);
  std::string string(const std::string& key, const std::string& def);
  std::string choice(const std::string& key, const std::string& def, const std::vector<std::string>& allowed);
  std::vector<int64_t> integer_list(const std::string& key, const std::vector<int64_t>& def, int64_t lo,
                                    int64_t hi);
  std::vector<double> number_list(const std::string& key, const std::vector<double>& def, double lo,
                                  double hi);
  std::vector<std::string> string_list(const std::string& key, const std::vector<std::string>& def);
  // A nested node (map or list) that the caller validates itself; marks the key as known.
  YAML::Node child(const std::string& key);
  // Marks keys as known without reading them (handled elsewhere).
  void accept(const std::vector<std::string>& keys);

  // Throws ConfigError for the first key never asked for.
  void finish() const;

  // Every value read so far, defaults included: the resolved config (--print-config).
  YAML::Node& resolved() { return resolved_; }
  const YAML::Node& resolved() const { return resolved_; }

  const std::string& path() const { return path_; }
  const std::string& file() const { return file_; }
  std::string key_path(const std::string& key) const;
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;
  // A location-prefixed error about the mapping itself.
  [[noreturn]] void fail_here(const std::string& what) const;

 private:
  YAML::Node get(const std::string& key);
  std::string scalar_text(const YAML::Node& n) const;

  YAML::Node node_;
  std::string path_;
  std::string file_;
  std::set<std::string> known_;
  YAML::Node resolved_{YAML::NodeType::Map};
};

}  // namespace trainer
