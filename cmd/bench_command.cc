// trainer bench: timings.
//   bench CONFIG                 steps/s of the config's model on synthetic batches (no data files)
//   bench CONFIG --memory        ... and where its memory goes, by allocation and category
//   bench                        the documents' matmul on the CPU and on each GPU, and the ratio
//   bench --sweep mlp-depth      the blog's MLP depth sweep on the CPU and on each GPU
// --out writes the matmul's or the sweep's table as CSV or JSON for scripts/plot.py.
#include <spdlog/spdlog.h>

#include <iostream>

#include "cmd/commands.h"
#include "cmd/config_flags.h"
#include "cmd/source_file.h"
#include "lib/core/error.h"
#include "lib/core/json_text.h"
#include "lib/train/bench.h"
#include "lib/train/bench_devices.h"
#include "lib/train/bench_report.h"

namespace trainer::cmd {
namespace {

std::string default_sweep_config() {
  const std::string name = "configs/mlp_disc.yaml";
  const std::string path = find_source_file(name);
  if (path.empty())
    throw UsageError("--sweep mlp-depth: no " + name +
                     " in this directory or above the trainer binary; give the config: trainer bench --sweep "
                     "mlp-depth path/to/mlp_disc.yaml");
  return path;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  struct State {
    ConfigFlags cf;
    OutputFlags of;
    BenchOptions bo;
    std::string math, sweep, out, size = "10000x100x100000";
    int64_t from = 2, to = 12, repeats = 3;
  };
  auto st = std::make_shared<State>();
  CLI::App* sub = app.add_subcommand(
      "bench",
      "With CONFIG: time training steps of its model on synthetic batches. Without: time the documents' "
      "matmul (--size) on the CPU and each GPU. With --sweep mlp-depth: the MLP depth sweep on the CPU "
      "and each GPU");
  st->cf.add_to(sub, FlagSet::inference);
  sub->get_option("config")->required(false)->description(
      "YAML config to time; none: the matmul, or with --sweep the swept config [default: "
      "configs/mlp_disc.yaml]");
  st->of.add_to(sub, false);
  sub->add_option("--steps", st->bo.steps,
                  "Timed steps [default: 200; --sweep: the config's epochs' worth, 100 x 10 = 1000]")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  sub->add_option("--warmup", st->bo.warmup, "Untimed steps after the first (with CONFIG) [default: 20]")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 30));
  sub->add_option("--math", st->math,
                  "fp32 | tf32 | bf16 | fp16 (bf16, fp16: with CONFIG) [default: config's math; fp32 without "
                  "a config]")
      ->check(CLI::IsMember(math_names()));
  sub->add_flag("--json", st->bo.json, "The same as --log-format json");
  sub->add_flag(
      "--memory", st->bo.memory,
      "With CONFIG: also print where the memory goes: each allocation, the activation arena by what "
      "it holds, and what the peak holds beyond the plan");
  sub->add_option("--sweep", st->sweep,
                  "mlp-depth: train the mlp config at each depth on the CPU and each GPU")
      ->check(CLI::IsMember({"mlp-depth"}));
  sub->add_option("--from", st->from, "--sweep: first depth [default: 2]")
      ->check(CLI::Range(int64_t(1), int64_t(64)));
  sub->add_option("--to", st->to, "--sweep: last depth [default: 12]")
      ->check(CLI::Range(int64_t(1), int64_t(64)));
  sub->add_option("--size", st->size, "Matmul MxKxN: (M x K) by (K x N) [default: 10000x100x100000]");
  sub->add_option("--repeat", st->repeats, "Matmul: timed products, the median is reported [default: 3]")
      ->check(CLI::Range(int64_t(1), int64_t(1000)));
  sub->add_option("--out", st->out,
                  "Matmul or sweep: also write the results to FILE.csv or FILE.json (plot.py)");
  sub->callback([st, sub]() {
    const bool json = st->bo.json || st->of.format == "json";
    st->of.options();  // --quiet lowers the log level
    const bool given_config = !st->cf.path.empty();
    if (st->sweep.empty() && given_config) {  // the config's model on synthetic batches
      if (!st->out.empty() || sub->count("--from") || sub->count("--to") || sub->count("--size") ||
          sub->count("--repeat"))
        throw UsageError(
            "--out, --from, --to, --size and --repeat go with the matmul (no CONFIG) or --sweep");
      ConfigFlags cf = st->cf;
      if (!st->math.empty()) cf.sets.push_back("math=" + st->math);
      Config cfg = cf.load();
      BenchOptions bo = st->bo;
      bo.json = json;
      bo.device = device_request(cfg);
      bo.from_process_start = true;
      run_bench(cfg, bo, std::cout);
      return;
    }
    if (st->bo.memory)
      throw UsageError("--memory goes with a CONFIG: it breaks down the memory of its model");
    if (!st->cf.device.empty())
      throw UsageError(
          "--device: the matmul and the sweeps run on the CPU and on every GPU; leave --device out");
    if (!st->out.empty()) check_bench_out(st->out);
    if (st->math == "bf16" || st->math == "fp16")
      throw UsageError("--math " + st->math + ": the matmul and sweep benches time fp32 and tf32; " +
                       st->math + " needs a CONFIG");
    DeviceRequest base;
    base.math = parse_math(st->math);  // fp32 or tf32 here
    base.threads = int(std::max<int64_t>(st->cf.threads, 0));
    base.mem_limit_bytes = size_t(st->cf.mem_limit) << 20;
    const BenchDevices devices = bench_devices();
    if (!devices.has_gpu()) spdlog::warn("GPU not available: {}; timing the CPU only", devices.gpu_note);
    if (st->sweep.empty()) {
      if (sub->count("--from") || sub->count("--to") || sub->count("--steps") || sub->count("--warmup"))
        throw UsageError("--from, --to, --steps and --warmup go with --sweep or a CONFIG, not the matmul");
      MatmulReport r;
      r.shape = parse_matmul_shape(st->size);
      r.repeats = int(st->repeats);
      r.gpu_note = devices.gpu_note;
      for (const std::string& d : devices.devices) {
        spdlog::info("matmul {} on {}", r.shape.str(), d);
        r.timings.push_back(time_matmul(r.shape, on_device(base, d), r.repeats));
      }
      if (!st->out.empty()) write_bench_out(st->out, matmul_csv(r), matmul_json(r));
      std::cout << (json ? trainer::json_text(matmul_json(r)) + "\n" : matmul_text(r)) << std::flush;
      return;
    }
    if (sub->count("--size") || sub->count("--repeat") || sub->count("--warmup"))
      throw UsageError("--size, --repeat and --warmup do not go with --sweep");
    SweepOptions so;
    so.config = given_config ? st->cf.path : default_sweep_config();
    so.sets = st->cf.sets;
    if (st->cf.batch_size > 0) so.sets.push_back("data.batch_size=" + std::to_string(st->cf.batch_size));
    if (!st->math.empty()) so.sets.push_back("math=" + st->math);
    so.from = st->from;
    so.to = st->to;
    so.steps = sub->count("--steps") ? st->bo.steps : 0;
    so.device = base;
    so.devices = devices.devices;
    const SweepResult r = run_mlp_depth_sweep(so, [](int64_t depth, const std::string& dev, double s) {
      spdlog::info("depth {} on {}: {:.3f} s", depth, dev, s);
    });
    if (!st->out.empty()) write_bench_out(st->out, sweep_csv(r), sweep_json(r, devices.gpu_note));
    std::cout << (json ? trainer::json_text(sweep_json(r, devices.gpu_note)) + "\n"
                       : sweep_text(r, devices.gpu_note))
              << std::flush;
  });
}

}  // namespace trainer::cmd
