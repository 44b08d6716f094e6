#include "lib/train/run_dir.h"

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <sstream>

#include "lib/checkpoint/atomic_file.h"
#include "lib/config/yaml_floats.h"
#include "lib/core/error.h"
#include "lib/train/checkpointing.h"
#include "lib/train/fit.h"

namespace fs = std::filesystem;

namespace trainer {

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
  // Only a complete checkpoint makes a run. A run killed while writing its first one leaves an
  // orphan weights file or a *.tmp-PID file, from which --resume cannot continue either.
  const bool has_run = !list_checkpoints(checkpoints()).empty();
  if (!resume && has_run)
    throw UsageError("--out " + dir_ + " already holds a run with checkpoints: continue it with --resume " +
                     dir_ + " or choose another --out");
  fs::create_directories(checkpoints(), ec);
  if (ec) throw RuntimeError("--out " + dir_ + ": cannot create the directory: " + ec.message());
  const std::string csv = dir_ + "/metrics.csv";
  csv_has_header_ = resume && fs::exists(csv) && fs::file_size(csv) > 0;
  if (!resume) std::ofstream(csv, std::ios::trunc);
  csv_.open(csv, std::ios::app);
  events_.open(dir_ + "/events.jsonl", resume ? std::ios::app : std::ios::trunc);
  if (!csv_ || !events_) throw RuntimeError("--out " + dir_ + ": cannot write metrics.csv or events.jsonl");
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
  csv_.close();
  write_file_atomic(csv, kept);
  csv_has_header_ = !kept.empty();
  csv_.open(csv, std::ios::app);
}

void RunDir::metrics_row(int64_t epoch, const std::vector<std::pair<std::string, double>>& columns) {
  if (!csv_has_header_) {
    csv_ << "epoch";
    for (const auto& c : columns) csv_ << "," << c.first;
    csv_ << "\n";
    csv_has_header_ = true;
  }
  std::ostringstream row;
  row.precision(9);
  row << epoch;
  for (const auto& c : columns) row << "," << c.second;
  csv_ << row.str() << "\n" << std::flush;
}

void RunDir::event(Json j) {
  j["time"] = timestamp_now();
  events_ << j.dump() << "\n" << std::flush;
}

void RunDir::write_summary(const Json& j) { write_file_atomic(dir_ + "/summary.json", j.dump(2) + "\n"); }

}  // namespace trainer
