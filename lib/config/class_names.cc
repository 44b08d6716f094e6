#include "lib/config/class_names.h"

#include "datasets/file_bytes.h"
#include "lib/keys/node_reader.h"

namespace trainer {
namespace {

std::string trimmed(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// A class-names file is a list of names: 16 MiB holds a million long ones. A bound, because a
// few MB of gzip inflate to gigabytes.
constexpr uint64_t kMaxClassNamesBytes = uint64_t(16) << 20;

std::vector<std::string> names_from_file(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file_bytes(path, kMaxClassNamesBytes, "a class-names file");
  std::string text(bytes.begin(), bytes.end());
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);
  std::vector<std::string> names;
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string name = trimmed(text.substr(pos, nl - pos));
    if (!name.empty()) names.push_back(std::move(name));
    pos = nl + 1;
  }
  return names;
}

}  // namespace

std::vector<std::string> read_class_names(NodeReader& data, int64_t num_classes) {
  const std::string key = "class_names";
  if (!data.has(key)) {
    data.accept({key});  // absent, or null: "--set data.class_names=" asks for the default, ids
    return {};
  }
  const YAML::Node n = data.child(key);
  std::vector<std::string> names;
  std::string from;
  if (n.IsScalar()) {
    from = "the file " + n.Scalar() + " has ";
    names = names_from_file(n.Scalar());
  } else if (n.IsSequence()) {
    for (size_t i = 0; i < n.size(); ++i) {
      if (!n[i].IsScalar() || trimmed(n[i].Scalar()).empty())
        data.fail(key, "item " + std::to_string(i) + ": expected a non-empty name");
      names.push_back(trimmed(n[i].Scalar()));
    }
    from = "has ";
  } else {
    data.fail(key, "expected a list of names, e.g. [cat, dog], or the path of a file with one name per line");
  }
  if (num_classes > 0 && int64_t(names.size()) != num_classes)
    data.fail(key, from + std::to_string(names.size()) + " names but data.num_classes is " +
                       std::to_string(num_classes) + "; give one name per class, in class id order");
  data.resolved()[key] = names;
  return names;
}

std::string class_label(const std::vector<std::string>& names, int64_t c) {
  return c >= 0 && size_t(c) < names.size() ? names[size_t(c)] : std::to_string(c);
}

}  // namespace trainer
