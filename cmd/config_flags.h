// Flags shared by verbs that read a config: CONFIG, --set, and the dedicated overrides; and the
// output flags of verbs that report (--log-format, --quiet, --log-every).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "lib/backend/backend_registry.h"
#include "lib/config/config.h"
#include "lib/train/progress.h"

namespace trainer::cmd {

enum class FlagSet {
  config_only,  // CONFIG and --set (summary)
  inference,    // + --device, --mem-limit, --mem-growth, --threads, --batch-size (eval, predict, bench)
  training,     // + --epochs, --seed (fit)
};

// The CONFIG argument: a YAML file always, or (fit, eval, predict) optionally a run directory's
// config.yaml in its place (fit --resume RUN, eval RUN).
enum class ConfigArg { file, file_or_run };

struct ConfigFlags {
  std::string path;
  std::vector<std::string> sets;
  // Dedicated flags; applied after --set (they win).
  std::string device;
  int64_t epochs = 0, batch_size = 0;
  int64_t seed = -1;
  int64_t threads = -1;
  int64_t mem_limit = 0;  // MiB; 0: the config's device.memory_limit
  bool mem_growth = false;

  void add_to(CLI::App* sub, FlagSet set, ConfigArg arg = ConfigArg::file);
  Config load() const;
  // ConfigArg::file_or_run: `path` names a run directory, or is empty and `run` names one (fit
  // --resume RUN): use RUN/config.yaml, the config that run recorded. Returns the run directory
  // ("" when `path` is a config file). UsageError for a run directory without config.yaml.
  std::string use_run_config(const std::string& run = "");
};

// The device a config asks for: device (with its memory cap and growth), math, deterministic,
// threads. The flags --device, --mem-limit and --mem-growth are already in the config (load()).
DeviceRequest device_request(const Config& cfg);

// Validator of a run directory flag (--out): a path that exists must be a directory. A regular file
// there is a usage error before the run starts, not a failed write after the model is built.
CLI::Validator run_directory_path();

// OMP_NUM_THREADS is a thread count as --threads is: each of its entries ("8", or "8,2" for nested
// levels) must be 1 to 4096, or libgomp would try to start them all (99999 crashed it). Called
// before any OpenMP region; UsageError naming the variable otherwise.
void check_thread_environment();

struct OutputFlags {
  std::string format = "text";
  bool quiet = false;
  int64_t log_every = 0;

  void add_to(CLI::App* sub, bool progress);
  // Decides the live line: only when the human stream (stdout, or stderr with --log-format json)
  // is a terminal. --quiet also lowers the log level to warnings.
  ReportOptions options() const;
};

}  // namespace trainer::cmd
