#include "lib/train/run_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "lib/core/error.h"
#include "lib/core/file_kind.h"

namespace fs = std::filesystem;

namespace trainer {
namespace {

const char* const kRunFiles[] = {"config.yaml",  "metrics.csv", "events.jsonl", "model.safetensors",
                                 "summary.json", "run.lock",    "checkpoints"};

bool digits(const std::string& s, size_t at, size_t n_min) {
  size_t n = 0;
  while (at + n < s.size() && std::isdigit(static_cast<unsigned char>(s[at + n]))) ++n;
  return n >= n_min && at + n == s.size();
}

// Consumes "<prefix><at least n_min digits>" at `at`; returns the position after it, or npos.
size_t take_number(const std::string& s, size_t at, const std::string& prefix, size_t n_min) {
  if (s.compare(at, prefix.size(), prefix) != 0) return std::string::npos;
  at += prefix.size();
  size_t n = 0;
  while (at + n < s.size() && std::isdigit(static_cast<unsigned char>(s[at + n]))) ++n;
  return n >= n_min ? at + n : std::string::npos;
}

bool is_ours_anywhere(const std::string& name) {
  return is_run_file_name(name) || is_checkpoint_file_name(name);
}

}  // namespace

bool is_run_file_name(const std::string& name) {
  return std::find(std::begin(kRunFiles), std::end(kRunFiles), name) != std::end(kRunFiles);
}

bool is_checkpoint_file_name(const std::string& name) {
  if (name == "best.safetensors") return true;
  size_t at = take_number(name, 0, "epoch-", 4);  // epoch-%04lld (more digits past epoch 9999)
  if (at == std::string::npos) return false;
  if (name.compare(at, 7, "-batch-") == 0) {
    at = take_number(name, at, "-batch-", 6);
    if (at == std::string::npos) return false;
  }
  const std::string rest = name.substr(at);
  return rest == ".safetensors" || rest == ".state.safetensors";
}

bool is_temp_file_name(const std::string& name, bool (*is_ours)(const std::string&), long* pid) {
  const size_t at = name.rfind(".tmp-");
  if (at == std::string::npos || at == 0 || !digits(name, at + 5, 1) || name.size() - at - 5 > 9)
    return false;
  if (!is_ours(name.substr(0, at))) return false;
  if (pid) *pid = std::stol(name.substr(at + 5));
  return true;
}

std::vector<std::string> foreign_entries(const std::string& dir, size_t limit) {
  std::vector<std::string> out;
  const auto scan = [&](const std::string& d, const std::string& rel, bool (*is_ours)(const std::string&)) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      const std::string name = e.path().filename().string();
      if (!is_ours(name) && !is_temp_file_name(name, is_ours_anywhere, nullptr)) out.push_back(rel + name);
    }
  };
  scan(dir, "", is_run_file_name);
  std::error_code ec;
  const std::string ck = dir + "/checkpoints";
  if (fs::is_directory(fs::symlink_status(ck, ec))) scan(ck, "checkpoints/", is_checkpoint_file_name);
  std::sort(out.begin(), out.end());
  if (out.size() > limit) out.resize(limit);
  return out;
}

void refuse_links_in_run_dir(const std::string& dir, const std::string& flag) {
  for (const char* name : kRunFiles) {
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) continue;
    const bool is_dir_entry = std::string(name) == "checkpoints";
    if (S_ISLNK(st.st_mode))
      throw DataError(flag + " " + dir + ": " + path +
                      " is a symbolic link; a run writes only inside its own directory, so its files "
                      "and checkpoints/ must be real ones: remove the link");
    if (is_dir_entry && !S_ISDIR(st.st_mode))
      throw DataError(flag + " " + dir + ": " + path + " is " + file_kind(st.st_mode) +
                      ", not a directory; remove it");
    if (!is_dir_entry && !S_ISREG(st.st_mode))
      throw DataError(flag + " " + dir + ": " + path + " is " + file_kind(st.st_mode) +
                      ", not a regular file; remove it");
  }
}

int open_run_file_for_append(const std::string& path, bool truncate) {
  // O_NONBLOCK: a FIFO opens at once (or fails with ENXIO) instead of waiting for a reader.
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0) {
    const int err = errno;
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      throw DataError(
          path + " is " + (S_ISLNK(st.st_mode) ? std::string("a symbolic link") : file_kind(st.st_mode)) +
          ", not a regular file; a run writes only regular files inside its directory: remove it");
    throw RuntimeError("cannot open " + path + " for writing: " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw DataError(path + " is " + file_kind(st.st_mode) +
                    ", not a regular file; a run writes only regular files inside its directory: remove it");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  if (truncate && ::ftruncate(fd, 0) != 0) {
    const int err = errno;
    ::close(fd);
    throw RuntimeError("cannot truncate " + path + ": " + std::strerror(err));
  }
  return fd;
}

}  // namespace trainer
