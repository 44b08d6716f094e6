// trainer fit CONFIG [flags]: train; epoch lines (or JSON lines) on stdout, a run directory with
// checkpoints under runs/ (or --out), --resume to continue one.
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>

#include "cmd/commands.h"
#include "cmd/config_flags.h"
#include "lib/backend/backend_registry.h"
#include "lib/backend/device_spec.h"
#include "lib/core/error.h"
#include "lib/dist/world.h"
#include "lib/keys/node_reader.h"
#include "lib/keys/yaml_floats.h"
#include "lib/model/model.h"
#include "lib/train/fit.h"
#include "lib/train/fit_replicas.h"
#include "lib/train/run_dir.h"

namespace trainer::cmd {
namespace {

// Where the epoch lines of ranks other than 0 go: a stream that accepts and drops everything (and
// so, unlike a stream without a buffer, never looks closed to the reporter).
std::ostream& discard_stream() {
  struct Discard : std::streambuf {
    int overflow(int c) override { return traits_type::not_eof(c); }
    std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
  };
  static Discard buffer;
  static std::ostream stream(&buffer);
  return stream;
}

// The GPUs this process trains on, one replica each; empty: the device as the config says (the
// CPU, auto, or one GPU outside mpirun).
//   one process:  gpu:N,M,... or gpu:all -> those GPUs (one replica per GPU, NCCL);
//   under mpirun: each rank takes one GPU: gpu (= gpu:0) and gpu:all take the rank's local rank
//                 (its place among the ranks of its host); gpu:N is honoured only with one rank per
//                 host; a list of several GPUs per rank is refused.
std::vector<int> replica_gpus(const std::string& device, const Communicator& comm) {
  const std::optional<DeviceSpec> d = parse_device(device);
  if (!d || d->kind != DeviceSpec::Kind::gpu) {
    if (comm.size() > 1 && (!d || d->kind != DeviceSpec::Kind::cpu))
      throw UsageError("--device " + device + " under mpirun (" + std::to_string(comm.size()) +
                       " ranks): give --device cpu, or --device gpu (each rank takes its local GPU)");
    return {};
  }
  if (comm.size() == 1 && !d->several()) return {};  // one GPU: BackendRegistry::create checks it
  const BackendRegistry& backends = BackendRegistry::global();
  // Counted, not listed: listing opens a context on every GPU, in every rank.
  const int present = backends.gpu_count();
  if (present == 0) {
    std::string why;
    backends.list_gpus(&why);
    throw RuntimeError("device " + device + ": no usable GPU: " + why);
  }
  const auto require_nccl = [&] {
    if (backends.gpu_collective_library().empty())
      throw UsageError("--device " + device + (comm.size() > 1 ? " under mpirun" : "") +
                       ": training on several GPUs needs NCCL, which this build does not have: install "
                       "NCCL (libnccl-dev) and rebuild, or train on one GPU (gpu:N)");
  };
  if (comm.size() == 1) {
    std::vector<int> gpus = check_gpu_list(*d, present);
    if (gpus.size() > 1) require_nccl();
    return gpus;  // gpu:all on a machine of one GPU: that GPU
  }
  require_nccl();
  const std::string ranks =
      std::to_string(comm.size()) + " ranks, " + std::to_string(comm.local_size()) + " on this host";
  if (d->gpus.size() > 1)
    throw UsageError("--device " + device + " under mpirun (" + ranks +
                     "): each rank trains on one GPU; give --device gpu (each rank takes its local GPU), or "
                     "run without mpirun for one process over several GPUs");
  if (!d->all_gpus && d->index != 0) {
    if (comm.local_size() > 1)
      throw UsageError("--device " + device + " under mpirun (" + ranks +
                       "): ranks of one host would share gpu:" + std::to_string(d->index) +
                       "; give --device gpu (each rank takes the GPU of its local rank) and choose GPUs with "
                       "CUDA_VISIBLE_DEVICES");
    return check_gpu_list(*d, present);
  }
  if (comm.local_rank() >= present)
    throw UsageError("--device " + device + " under mpirun (" + ranks + "): rank " +
                     std::to_string(comm.rank()) + " is local rank " + std::to_string(comm.local_rank()) +
                     " of its host, which has " + std::to_string(present) + " GPU(s): start at most " +
                     std::to_string(present) + " ranks per host");
  return {comm.local_rank()};
}

}  // namespace

void add_fit_command(CLI::App& app) {
  struct State {
    ConfigFlags cf;
    OutputFlags of;
    bool print_config = false, deterministic = false, no_out = false;
    std::string out, resume, math;
  };
  auto st = std::make_shared<State>();
  CLI::App* sub = app.add_subcommand("fit", "Train the model described by a YAML config");
  st->cf.add_to(sub, FlagSet::training, ConfigArg::file_or_run);
  st->of.add_to(sub, true);
  sub->add_option(
         "--math", st->math,
         "fp32 (strict, the default) | tf32 (GPU tensor cores) | bf16 (GPU; CPU: AVX-512 BF16/AMX) | "
         "fp16 (GPU, with dynamic loss scaling) [default: config's math]")
      ->check(CLI::IsMember(math_names()));
  sub->add_flag("--deterministic", st->deterministic,
                "GPU: deterministic cuDNN algorithms only, attention without its fused kernels");
  sub->add_flag("--print-config", st->print_config, "Print the resolved config (defaults filled) and exit");
  auto* out =
      sub->add_option(
             "--out", st->out,
             "Run directory: config.yaml, metrics.csv, events.jsonl, checkpoints/, model.safetensors, "
             "summary.json [default: runs/<config name>-<YYYYmmdd-HHMMSS>]")
          ->check(run_directory_path());
  auto* no_out = sub->add_flag("--no-out", st->no_out, "Write no run directory (and so no checkpoints)");
  auto* resume =
      sub->add_option("--resume", st->resume,
                      "Continue the run in this directory from its newest checkpoint, up to the config's "
                      "(or --epochs') last epoch; new records are appended to it. Without CONFIG, the "
                      "run's own config.yaml (with the epochs and flags it was started with)");
  out->excludes(no_out);
  resume->excludes(out);
  resume->excludes(no_out);
  sub->callback([st]() {
    ConfigFlags cf = st->cf;
    std::error_code ec;
    if (cf.path.empty() && st->resume.empty())
      throw UsageError(
          "a config is required: trainer fit CONFIG, or trainer fit --resume RUN to continue a run");
    if (!cf.path.empty() && std::filesystem::is_directory(cf.path, ec))
      throw UsageError(cf.path + " is a directory, not a config file" +
                       (std::filesystem::exists(cf.path + "/config.yaml", ec)
                            ? "; to continue the run in it: trainer fit --resume " + cf.path
                            : "; give a YAML config"));
    if (cf.path.empty()) {
      if (!std::filesystem::is_directory(st->resume, ec))
        throw UsageError("--resume " + st->resume + ": no such run directory");
      cf.use_run_config(st->resume);
    }
    if (!st->math.empty()) cf.sets.push_back("math=" + st->math);
    if (st->deterministic) cf.sets.push_back("train.deterministic=true");
    Config cfg = cf.load();
    if (st->print_config) {
      Model model(cfg.input_shape, cfg.layers, cfg.init, cfg.file, cfg.blocks);  // validates every layer
      YAML::Node resolved = cfg.resolved;  // data sources and device included
      resolved["model"]["layers"] = model.describe_layers();
      std::cout << dump_yaml(resolved) << std::endl;
      return;
    }
    FitOptions fo;
    fo.device = device_request(cfg);
    // Under mpirun every rank runs this; they train one model together (lib/train/fit.h).
    Communicator& comm = world();
    // Model parallelism: one process; a GPU list gives each stage its GPU (lib/train/session.h).
    const bool split = !cfg.stages.empty() || cfg.micro_batches > 1;
    if (split && comm.size() > 1)
      throw UsageError("model.stages / pipeline.micro_batches (model parallelism) under mpirun (" +
                       std::to_string(comm.size()) +
                       " ranks): combining it with data parallelism is not supported yet; run one process, "
                       "with --device gpu:0,1 giving stage k the k-th GPU");
    if (split && cfg.stages.empty() && parse_device(fo.device.device) &&
        parse_device(fo.device.device)->several())
      throw UsageError("--device " + fo.device.device +
                       " with pipeline.micro_batches but without model.stages: data parallelism over several "
                       "GPUs with micro-batches is not supported yet; give model.stages (a stage per GPU) or "
                       "one GPU");
    const std::vector<int> gpus = split ? std::vector<int>{} : replica_gpus(fo.device.device, comm);
    if (comm.size() > 1) {
      if (!gpus.empty()) fo.device.device = "gpu:" + std::to_string(gpus.front());
      if (!comm.is_root()) spdlog::set_level(spdlog::level::err);  // rank 0 alone logs
    }
    fo.comm = &comm;
    fo.report = st->of.options();
    fo.resume_dir = st->resume;
    if (st->resume.empty() && !st->no_out)
      fo.out_dir = st->out.empty() ? RunDir::default_path(cfg.file) : st->out;
    if (comm.size() == 1 && gpus.size() > 1) {
      fit_replicas(cfg, fo, gpus, std::cout);  // one process, one replica (thread) per GPU
      return;
    }
    if (comm.size() == 1 && gpus.size() == 1) fo.device.device = "gpu:" + std::to_string(gpus.front());
    fit(cfg, fo, comm.is_root() ? std::cout : discard_stream());
  });
}

}  // namespace trainer::cmd
