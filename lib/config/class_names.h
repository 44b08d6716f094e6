// data.class_names: one name per class, used by the per-class report, the confusion matrix,
// eval's JSON and predict's output. Either a list in the config or the path of a UTF-8 text
// file with one name per line (blank lines skipped, "\r\n" accepted, spaces around names trimmed).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainer {

class NodeReader;

// Reads data.class_names from `data` (the data section's reader), or {} when absent. Throws
// ConfigError at the key's file:line:column when the count differs from num_classes (when it is
// not 0: not given) or a name is
// empty or not a string; DataError when the file cannot be read. Records the names themselves
// (never the file's path) in the resolved config, so a run directory keeps them.
std::vector<std::string> read_class_names(NodeReader& data, int64_t num_classes);

// "T-shirt/top", or "3" when there are no names.
std::string class_label(const std::vector<std::string>& names, int64_t c);

}  // namespace trainer
