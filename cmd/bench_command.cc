// trainer bench CONFIG: steps/s of the config's model on synthetic batches (no data files).
#include <iostream>

#include "cmd/commands.h"
#include "cmd/config_flags.h"
#include "lib/train/bench.h"

namespace trainer::cmd {

void add_bench_command(CLI::App& app) {
  struct State {
    ConfigFlags cf;
    BenchOptions bo;
    std::string math;
  };
  auto st = std::make_shared<State>();
  CLI::App* sub = app.add_subcommand(
      "bench", "Time training steps of the config's model on synthetic batches of its input shape");
  st->cf.add_to(sub, FlagSet::inference);
  sub->add_option("--steps", st->bo.steps, "Timed steps [default: 200]")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  sub->add_option("--warmup", st->bo.warmup, "Untimed steps after the first [default: 20]")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 30));
  sub->add_option("--math", st->math, "fp32 | tf32 [default: config's math]")
      ->check(CLI::IsMember({"fp32", "tf32"}));
  sub->add_flag("--json", st->bo.json, "Print one JSON object instead of a text line");
  sub->callback([st]() {
    ConfigFlags cf = st->cf;
    if (!st->math.empty()) cf.sets.push_back("math=" + st->math);
    Config cfg = cf.load();
    BenchOptions bo = st->bo;
    bo.device = device_request(cfg);
    run_bench(cfg, bo, std::cout);
  });
}

}  // namespace trainer::cmd
