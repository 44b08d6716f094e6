#include "lib/train/input_files.h"

#include <filesystem>
#include <string>
#include <vector>

#include "datasets/file_bytes.h"
#include "lib/config/node_reader.h"
#include "lib/core/error.h"

namespace trainer {
namespace {

// The file paths of one source section; the format's keys are validated later, by the reader.
bool is_format(const YAML::Node& section, const char* name) {
  const YAML::Node format = section.IsMap() ? section["format"] : YAML::Node();
  return format && format.IsScalar() && format.Scalar() == name;
}

// format image_folder: `path` is a folder (its images are listed when it is read).
void check_folder(const YAML::Node& section) {
  if (!is_format(section, "image_folder") || !section["path"] || !section["path"].IsScalar()) return;
  const std::string path = section["path"].Scalar();
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec) throw DataError("cannot open '" + path + "': " + ec.message());
  if (!std::filesystem::is_directory(st))
    throw DataError("'" + path +
                    "' is not a folder; format image_folder reads a folder with one subfolder of "
                    "images per class");
}

std::vector<std::string> files_of(const YAML::Node& section) {
  std::vector<std::string> paths;
  if (!section.IsMap()) return paths;
  if (is_format(section, "disc") || is_format(section, "random") || is_format(section, "image_folder"))
    return paths;
  for (const char* key : {"images", "labels", "x", "y", "path", "targets"})
    if (section[key] && section[key].IsScalar()) paths.push_back(section[key].Scalar());
  if (section["files"] && section["files"].IsSequence())
    for (const auto& f : section["files"])
      if (f.IsScalar()) paths.push_back(f.Scalar());
  return paths;
}

}  // namespace

void check_input_files(const Config& cfg, bool need_train) {
  std::vector<std::string> paths;
  if (need_train || !present(cfg.data.validation)) {
    paths = files_of(cfg.data.train);
    check_folder(cfg.data.train);
  }
  for (const auto& p : files_of(cfg.data.validation)) paths.push_back(p);
  check_folder(cfg.data.validation);
  for (const auto& p : paths) DataFile probe(p, DataFile::Gzip::never);
}

}  // namespace trainer
