// AlgoCache: measured algorithm choices kept on disk (cuDNN's convolution algorithms, measured
// once per shape when a plan is built), so that a machine measures a shape once, not every
// process: the first step of a warm start skips the measurement, as cuDNN's and XLA's autotune
// caches do. Text, one entry a line, "key<TAB>value"; the key names what the choice depends on
// (the GPU, its driver and the library versions, the shape, the dtype, the math).
//
// The file is a cache: it never fails a run. An unreadable or damaged file is ignored line by
// line (a warning once), an entry the caller finds invalid is measured again, and a failed save
// is a warning. Saves replace the file atomically (lib/checkpoint/atomic_file.h) after merging
// what other processes saved meanwhile.
#pragma once

#include <map>
#include <mutex>
#include <string>

namespace trainer {

class AlgoCache {
 public:
  // path "": a cache that keeps choices in memory only.
  explicit AlgoCache(std::string path);

  // Where the cache file `name` lives: $TRAINER_CACHE_DIR, else $XDG_CACHE_HOME/trainer, else
  // $HOME/.cache/trainer; "" when TRAINER_CACHE_DIR is set to "" or "off", or no directory is known.
  static std::string default_path(const std::string& name);

  const std::string& path() const { return path_; }
  bool get(const std::string& key, std::string* value);
  // Keeps the entry and saves the file. Tabs and line breaks in key or value become spaces.
  void put(const std::string& key, const std::string& value);

 private:
  void load_locked();  // once, on first use
  std::map<std::string, std::string> read_file() const;

  std::string path_;
  std::mutex mutex_;
  bool loaded_ = false;
  std::map<std::string, std::string> entries_;
};

}  // namespace trainer
