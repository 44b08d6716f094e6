#include "lib/train/input_files.h"

#include <string>
#include <vector>

#include "datasets/file_bytes.h"
#include "lib/config/node_reader.h"

namespace trainer {
namespace {

// The file paths of one source section; the format's keys are validated later, by the reader.
std::vector<std::string> files_of(const YAML::Node& section) {
  std::vector<std::string> paths;
  if (!section.IsMap()) return paths;
  const YAML::Node format = section["format"];
  if (format && format.IsScalar() && (format.Scalar() == "disc" || format.Scalar() == "random")) return paths;
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
  if (need_train || !present(cfg.data.validation)) paths = files_of(cfg.data.train);
  for (const auto& p : files_of(cfg.data.validation)) paths.push_back(p);
  for (const auto& p : paths) DataFile probe(p, DataFile::Gzip::never);
}

}  // namespace trainer
