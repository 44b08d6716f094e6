#include "cmd/config_flags.h"

#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "lib/backend/device_spec.h"
#include "lib/core/error.h"
#include "lib/dist/world.h"

namespace trainer::cmd {

void ConfigFlags::add_to(CLI::App* sub, FlagSet set, ConfigArg arg) {
  if (arg == ConfigArg::file)
    sub->add_option("config", path, "YAML config file")->required()->check(CLI::ExistingFile);
  else
    sub->add_option("config", path, "YAML config file, or a run directory (its config.yaml)")
        ->check(CLI::ExistingPath);
  sub->add_option("--set", sets,
                  "Override any config key: dotted.key=value (repeatable), e.g. --set optimizer.lr=0.01 "
                  "--set model.layers.3.units=64")
      ->take_all();
  if (set == FlagSet::config_only) return;
  sub->add_option("--device", device,
                  "cpu | gpu:N | gpu | auto (first GPU, else the CPU) | fit: gpu:N,M,... or gpu:all (one "
                  "replica per GPU, NCCL) [default: config's device, cpu]");
  sub->add_option("--mem-limit", mem_limit,
                  "Hard cap in MiB on all memory the tool allocates for the model on its device: GPU memory, "
                  "or host memory on the CPU (parameters, gradients, optimizer state, activations, "
                  "workspaces) [default: config's device.memory_limit, no cap]")
      ->check(CLI::Validator(
          [](std::string& v) {
            const bool digits = !v.empty() && v.find_first_not_of("0123456789") == std::string::npos;
            return digits ? std::string() : "'" + v + "' is not a whole number of MiB";
          },
          ""))
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  sub->add_flag("--mem-growth", mem_growth,
                "GPU: start small and grow on demand up to --mem-limit, instead of reserving up front "
                "[default: config's device.memory_growth, off]");
  sub->add_option("--threads", threads,
                  "CPU threads for oneDNN and our loops [default: config's threads, else OMP_NUM_THREADS, "
                  "else (fit --resume) the checkpoint's, else the cores this process may use]")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  sub->add_option("--batch-size", batch_size, "Batch size [default: config's data.batch_size, 32]")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  if (set != FlagSet::training) return;
  sub->add_option("--epochs", epochs, "Number of epochs [default: config's train.epochs, 10]")
      ->check(CLI::Range(int64_t(1), int64_t(1000000)));
  sub->add_option("--seed", seed,
                  "Random seed for init, shuffling and dropout [default: config's train.seed, 0]")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 62));
}

Config ConfigFlags::load() const {
  std::vector<std::string> all = sets;
  if (!device.empty()) {  // type and id; the file's memory settings stay
    const std::optional<DeviceSpec> d = parse_device(device);
    if (!d)
      throw UsageError("--device " + device + ": allowed: " + kDeviceForms +
                       " (fit also: " + kSeveralGpuForms + ")");
    all.push_back(std::string("device.type=") + (d->kind == DeviceSpec::Kind::gpu ? "gpu" : d->str()));
    const bool one_gpu = d->kind == DeviceSpec::Kind::gpu && !d->several();
    all.push_back(one_gpu ? "device.id=" + std::to_string(d->index) : "device.id=");
    all.push_back(d->several() ? "device.gpus=" + d->str().substr(4) : "device.gpus=");
  }
  if (mem_limit > 0) all.push_back("device.memory_limit=" + std::to_string(mem_limit));
  if (mem_growth) all.push_back("device.memory_growth=true");
  if (epochs > 0) all.push_back("train.epochs=" + std::to_string(epochs));
  if (batch_size > 0) all.push_back("data.batch_size=" + std::to_string(batch_size));
  if (seed >= 0) all.push_back("train.seed=" + std::to_string(seed));
  if (threads > 0) all.push_back("threads=" + std::to_string(threads));
  return load_config(path, all);
}

std::string ConfigFlags::use_run_config(const std::string& run) {
  std::error_code ec;
  std::string dir;
  if (path.empty() && run.empty()) throw UsageError("a config file or a run directory is required");
  if (path.empty())
    dir = run;
  else if (std::filesystem::is_directory(path, ec))
    dir = path;
  if (dir.empty()) return "";
  const std::string recorded = dir + "/config.yaml";
  if (!std::filesystem::exists(recorded, ec))
    throw UsageError(dir + " has no config.yaml, so it is not a run directory of trainer fit" +
                     (path.empty() ? "; give the config too: trainer fit CONFIG --resume " + dir : ""));
  path = recorded;
  return dir;
}

DeviceRequest device_request(const Config& cfg) {
  DeviceRequest d;
  d.device = cfg.device;
  d.math = cfg.math;
  d.deterministic = cfg.deterministic;
  d.threads = cfg.threads;
  d.mem_limit_bytes = size_t(cfg.memory_limit_mib) << 20;
  d.mem_growth = cfg.memory_growth;
  return d;
}

void check_thread_environment() {
  const char* value = std::getenv("OMP_NUM_THREADS");
  if (!value || !*value) return;  // unset or empty: libgomp ignores it too
  const std::string text = value;
  size_t at = 0;
  for (;;) {
    const size_t end = std::min(text.find(',', at), text.size());
    std::string item = text.substr(at, end - at);
    while (!item.empty() && item.front() == ' ') item.erase(0, 1);
    while (!item.empty() && item.back() == ' ') item.pop_back();
    const bool digits =
        !item.empty() && item.size() <= 9 && item.find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stol(item) < 1 || std::stol(item) > 4096)
      throw UsageError("OMP_NUM_THREADS='" + (text.size() > 200 ? text.substr(0, 200) + "..." : text) +
                       "': each thread count must be a whole number from 1 to 4096, as --threads; lower or "
                       "unset it");
    if (end == text.size()) break;
    at = end + 1;
  }
}

CLI::Validator run_directory_path() {
  return CLI::Validator(
      [](std::string& path) {
        std::error_code ec;
        const auto status = std::filesystem::status(path, ec);
        if (!std::filesystem::exists(status) || std::filesystem::is_directory(status)) return std::string();
        return "'" + path + "' exists and is not a directory; give a new or existing run directory";
      },
      "");
}

void OutputFlags::add_to(CLI::App* sub, bool progress) {
  sub->add_option("--log-format", format,
                  "text: human lines on stdout | json: one JSON object per line on stdout (per epoch and a "
                  "final summary), human text on stderr [default: text]")
      ->check(CLI::IsMember({"text", "json"}));
  sub->add_flag("--quiet,-q", quiet, "Print only the final summary line (or JSON object); log warnings only");
  if (!progress) return;
  sub->add_option(
         "--log-every", log_every,
         "On a terminal, refresh the live progress line every N steps (each refresh syncs the device) "
         "[default: about every 0.5 s]")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40));
}

ReportOptions OutputFlags::options() const {
  ReportOptions r;
  r.format = format == "json" ? LogFormat::json : LogFormat::text;
  r.quiet = quiet;
  r.log_every = log_every;
  const int fd = r.format == LogFormat::json ? STDERR_FILENO : STDOUT_FILENO;
  const char* term = std::getenv("TERM");
  // Under mpirun a rank's output is a pseudo-terminal of Open MPI's, whatever mpirun's own output
  // is (a log file, a pipe): no live line there, or its \r and escape codes land in the log.
  r.live = !quiet && ::isatty(fd) && !(term && std::strcmp(term, "dumb") == 0) && launcher_world_size() == 0;
  struct winsize ws {};
  if (r.live && ::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) r.columns = ws.ws_col;
  if (quiet) spdlog::set_level(spdlog::level::warn);
  return r;
}

}  // namespace trainer::cmd
