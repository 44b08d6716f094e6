#include "lib/train/run_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lib/checkpoint/atomic_file.h"
#include "lib/core/error.h"
#include "lib/core/json_text.h"
#include "lib/keys/yaml_floats.h"
#include "lib/train/checkpointing.h"
#include "lib/train/fit.h"
#include "lib/train/run_files.h"

namespace fs = std::filesystem;

namespace trainer {
namespace {

// Best effort, as the records always were: a failing disk shows at the next checkpoint, which
// is written atomically and checked.
void append_all(int fd, const std::string& text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= size_t(n);
  }
}

}  // namespace

std::string RunDir::default_path(const std::string& config_file) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  std::string stem = fs::path(config_file).stem().string();
  if (stem.empty()) stem = "run";
  const std::string base = "runs/" + stem + "-" + stamp;
  std::string dir = base;
  for (int i = 2; fs::exists(dir); ++i) dir = base + "-" + std::to_string(i);
  return dir;
}

RunDir::RunDir(std::string dir, bool resume) : dir_(std::move(dir)) {
  std::error_code ec;
  refuse_links_in_run_dir(dir_, resume ? "--resume" : "--out");
  // Only a complete checkpoint makes a run. A run killed while writing its first one leaves an
  // orphan weights file or a *.tmp-PID file, from which --resume cannot continue either.
  const bool has_run = !list_checkpoints(checkpoints()).empty();
  if (!resume && has_run)
    throw UsageError("--out " + dir_ + " already holds a run with checkpoints: continue it with --resume " +
                     dir_ + " or choose another --out");
  fs::create_directories(checkpoints(), ec);
  if (ec) throw RuntimeError("--out " + dir_ + ": cannot create the directory: " + ec.message());
  csv_fd_ = open_run_file_for_append(dir_ + "/metrics.csv", !resume);
  try {
    events_fd_ = open_run_file_for_append(dir_ + "/events.jsonl", !resume);
  } catch (...) {
    ::close(csv_fd_);
    throw;
  }
  struct stat st {};
  csv_has_header_ = resume && ::fstat(csv_fd_, &st) == 0 && st.st_size > 0;
}

RunDir::~RunDir() {
  if (csv_fd_ >= 0) ::close(csv_fd_);
  if (events_fd_ >= 0) ::close(events_fd_);
}

void RunDir::write_config(const YAML::Node& resolved) {
  write_file_atomic(dir_ + "/config.yaml", dump_yaml(resolved) + "\n");
}

void RunDir::truncate_metrics(int64_t keep_through) {
  const std::string csv = dir_ + "/metrics.csv";
  std::ifstream in(csv);
  std::string line, kept;
  bool first = true;
  while (std::getline(in, line)) {
    if (!first) {
      const long long epoch = std::atoll(line.substr(0, line.find(',')).c_str());
      if (epoch > keep_through) continue;
    }
    kept += line + "\n";
    first = false;
  }
  in.close();
  ::close(csv_fd_);
  csv_fd_ = -1;
  write_file_atomic(csv, kept);
  csv_has_header_ = !kept.empty();
  csv_fd_ = open_run_file_for_append(csv, false);
}

void RunDir::metrics_row(int64_t epoch, const std::vector<std::pair<std::string, double>>& columns) {
  std::string header;
  if (!csv_has_header_) {
    header = "epoch";
    for (const auto& c : columns) header += "," + c.first;
    header += "\n";
    csv_has_header_ = true;
  }
  std::ostringstream row;
  row.precision(9);
  row << epoch;
  for (const auto& c : columns) row << "," << c.second;
  append_all(csv_fd_, header + row.str() + "\n");
}

void RunDir::event(Json j) {
  j["time"] = timestamp_now();
  append_all(events_fd_, json_text(j) + "\n");
}

void RunDir::write_summary(const Json& j) {
  write_file_atomic(dir_ + "/summary.json", json_text(j, 2) + "\n");
}

}  // namespace trainer
