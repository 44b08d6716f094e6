#include "cmd/source_file.h"

#include <filesystem>

namespace trainer::cmd {

std::string find_source_file(const std::string& relative, bool binary_first) {
  std::error_code ec;
  const bool here = std::filesystem::is_regular_file(relative, ec);
  if (here && !binary_first) return relative;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec)
    for (auto dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path())
      for (const auto& candidate : {dir / relative, dir / "share/trainer" / relative})  // a tree, an install
        if (std::filesystem::is_regular_file(candidate, ec)) return candidate.string();
  return here ? relative : "";
}

}  // namespace trainer::cmd
