#include "lib/backend/algo_cache.h"

#include <spdlog/spdlog.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lib/checkpoint/atomic_file.h"
#include "lib/core/error.h"

namespace trainer {
namespace {

// A file this large is no cache of ours (an entry is a line of about 200 bytes).
constexpr uintmax_t kMaxFileBytes = uintmax_t(64) << 20;

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace

AlgoCache::AlgoCache(std::string path) : path_(std::move(path)) {}

std::string AlgoCache::default_path(const std::string& name) {
  std::string dir;
  if (const char* d = std::getenv("TRAINER_CACHE_DIR")) {
    const std::string v = d;
    if (v.empty() || v == "off") return "";
    dir = v;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    dir = std::string(x) + "/trainer";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dir = std::string(h) + "/.cache/trainer";
  } else {
    return "";
  }
  return dir + "/" + name;
}

std::map<std::string, std::string> AlgoCache::read_file() const {
  std::map<std::string, std::string> out;
  if (path_.empty()) return out;
  // Only a regular file of a sane size is read: the path may name (or link to) a device, a FIFO
  // or a folder, which would read forever, block or fail.
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path_, ec);
  if (ec || st.type() == std::filesystem::file_type::not_found) return out;  // none yet
  const uintmax_t size =
      st.type() == std::filesystem::file_type::regular ? std::filesystem::file_size(path_, ec) : 0;
  if (st.type() != std::filesystem::file_type::regular || ec || size > kMaxFileBytes) {
    spdlog::warn(
        "{}: not a regular file of at most {} MiB; ignored (a cache of measured algorithms: delete it "
        "or set TRAINER_CACHE_DIR to another folder)",
        path_, kMaxFileBytes >> 20);
    return out;
  }
  std::ifstream in(path_, std::ios::binary);
  if (!in) return out;
  std::string line;
  int64_t bad = 0, at = 0;
  while (std::getline(in, line)) {
    ++at;
    const size_t tab = line.find('\t');
    if (tab == std::string::npos || tab == 0 || line.find('\t', tab + 1) != std::string::npos ||
        line.find('\0') != std::string::npos) {
      ++bad;
      continue;
    }
    out[line.substr(0, tab)] = line.substr(tab + 1);
  }
  if (bad)
    spdlog::warn(
        "{}: {} of {} lines are not 'key<TAB>value' and were ignored (a cache of measured "
        "algorithms: delete it to start afresh)",
        path_, bad, at);
  return out;
}

void AlgoCache::load_locked() {
  if (loaded_) return;
  loaded_ = true;
  entries_ = read_file();
}

bool AlgoCache::get(const std::string& key, std::string* value) {
  std::lock_guard<std::mutex> lock(mutex_);
  load_locked();
  const auto it = entries_.find(one_line(key));
  if (it == entries_.end()) return false;
  *value = it->second;
  return true;
}

void AlgoCache::put(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mutex_);
  load_locked();
  entries_[one_line(key)] = one_line(value);
  if (path_.empty()) return;
  // Other processes may have saved since we loaded: keep theirs, ours win on the same key.
  std::map<std::string, std::string> merged = read_file();
  for (const auto& [k, v] : entries_) merged[k] = v;
  entries_ = merged;
  std::ostringstream text;
  for (const auto& [k, v] : merged) text << k << '\t' << v << '\n';
  try {
    std::error_code ec;
    std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ec);
    write_file_atomic(path_, text.str());
  } catch (const Error& e) {
    static bool warned = false;
    if (!warned)
      spdlog::warn(
          "the measured algorithms are not kept for the next run: {} (TRAINER_CACHE_DIR names another "
          "folder, "
          "or off)",
          e.what());
    warned = true;
  }
}

}  // namespace trainer
