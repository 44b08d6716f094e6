#include "lib/data/input_files.h"

#include <filesystem>
#include <string>
#include <vector>

#include "datasets/file_bytes.h"
#include "lib/core/error.h"
#include "lib/data/data_formats.h"
#include "lib/keys/node_reader.h"

namespace trainer {
namespace {

// A folder format (image_folder): `path` must be a folder; its files are listed when it is read.
void check_folder(const YAML::Node& section) {
  const DataFormat* f = section_format(section);
  if (!f || !f->folder || !section["path"] || !section["path"].IsScalar()) return;
  const std::string path = section["path"].Scalar();
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec) throw DataError("cannot open '" + path + "': " + ec.message());
  if (!std::filesystem::is_directory(st))
    throw DataError("'" + path + "' is not a folder; format " + f->name + " reads " +
                    key_named(f->keys, "path").doc);
}

// Every file a source section names, with its key: the format's file keys, scalars or the items
// of lists (the config's validation has checked which is which; it refuses an unknown format).
std::vector<std::pair<std::string, YAML::Node>> file_nodes(const YAML::Node& section) {
  std::vector<std::pair<std::string, YAML::Node>> out;
  const DataFormat* f = section_format(section);
  if (!f) return out;
  for (const std::string& key : f->file_keys) {
    const YAML::Node v = section[key];
    if (v && v.IsScalar()) out.emplace_back(key, v);
    if (v && v.IsSequence())
      for (const auto& item : v)
        if (item.IsScalar()) out.emplace_back(key, item);
  }
  return out;
}

// The files to probe before reading: a folder format's are checked as a folder instead.
std::vector<std::string> files_of(const YAML::Node& section) {
  std::vector<std::string> paths;
  const DataFormat* f = section_format(section);
  if (f && f->folder) return paths;
  for (const auto& [key, node] : file_nodes(section)) paths.push_back(node.Scalar());
  return paths;
}

}  // namespace

std::string data_error_place(const YAML::Node& section, const std::string& path, const std::string& file,
                             const std::string& message) {
  if (message.rfind(path + ":", 0) == 0 || message.rfind(path + ".", 0) == 0)
    return node_location(file, section) + ": ";
  // The readers quote a path ('x.npy') or start a line's place with it (x.csv:12:).
  for (const auto& [key, f] : file_nodes(section)) {
    const std::string& name = f.Scalar();
    if (!name.empty() && (message.find("'" + name + "'") != std::string::npos ||
                          message.rfind(name + ":", 0) == 0 || message.rfind(name + "/", 0) == 0))
      return node_location(file, f) + ": " + path + "." + key + ": ";
  }
  return node_location(file, section) + ": " + path + ": ";
}

void check_input_files(const YAML::Node& train, const YAML::Node& validation, const std::string& file,
                       bool need_train) {
  const auto check = [&file](const YAML::Node& section, const std::string& path) {
    try {
      check_folder(section);
      for (const auto& p : files_of(section)) DataFile probe(p, DataFile::Gzip::never);
    } catch (const DataError& e) {
      throw DataError(data_error_place(section, path, file, e.what()) + e.what());
    }
  };
  if (need_train || !present(validation)) check(train, "data.train");
  check(validation, "data.validation");
}

}  // namespace trainer
