// RunDir: the directory one training run writes (fit --out DIR, default runs/<config>-<time>):
//
//   config.yaml          the resolved config (defaults filled, model layers described)
//   metrics.csv          one row per epoch: epoch, every train metric, every val_ metric, lr, seconds
//   events.jsonl         one JSON object per line: start, resume, epoch, checkpoint, best,
//                        lr_reduced, early_stop, interrupted, end
//   checkpoints/         resumable checkpoints and best.safetensors (lib/train/checkpointing.h)
//   model.safetensors    the final weights (after early stopping's restore_best)
//   summary.json         best epoch and value, total time, peak memory, device, final metrics
//   run.lock             held (flock) by the run writing the directory (lib/train/run_lock.h)
// Files that are replaced are written atomically (the rename replaces the entry, never a file a
// link points to); metrics.csv and events.jsonl are appended line by line through descriptors
// opened with O_NOFOLLOW (lib/train/run_files.h). A resumed run continues the same directory.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <utility>
#include <vector>

#include "lib/train/progress.h"

namespace trainer {

class RunDir {
 public:
  // "runs/<config file stem>-<YYYYmmdd-HHMMSS>", with "-2", "-3"... when that exists already.
  static std::string default_path(const std::string& config_file);

  // Creates the directory (and checkpoints/). A fresh run refuses a directory that already holds
  // a run's checkpoints (UsageError: use --resume); resume=true requires one.
  RunDir(std::string dir, bool resume);
  ~RunDir();
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;

  const std::string& path() const { return dir_; }
  std::string checkpoints() const { return checkpoints_of(dir_); }
  // The checkpoints folder of run directory `dir`.
  static std::string checkpoints_of(const std::string& dir) { return dir + "/checkpoints"; }

  void write_config(const YAML::Node& resolved);
  // Appends one row; the header is written with the first row of a new file. Resuming drops
  // rows of epochs after `keep_through` first (they are trained again).
  void metrics_row(int64_t epoch, const std::vector<std::pair<std::string, double>>& columns);
  void truncate_metrics(int64_t keep_through);
  void event(Json j);  // adds "time"
  void write_summary(const Json& j);

 private:
  std::string dir_;
  int csv_fd_ = -1, events_fd_ = -1;  // appended; never through a symbolic link
  bool csv_has_header_ = false;
};

}  // namespace trainer
