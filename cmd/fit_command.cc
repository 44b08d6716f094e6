// trainer fit CONFIG [flags]: train, print timestamped epoch lines on stdout.
#include <iostream>

#include "cmd/commands.h"
#include "cmd/config_flags.h"
#include "lib/config/node_reader.h"
#include "lib/core/error.h"
#include "lib/model/model.h"
#include "lib/train/data_sources.h"
#include "lib/train/fit.h"

namespace trainer::cmd {

void add_fit_command(CLI::App& app) {
  struct State {
    ConfigFlags cf;
    int64_t mem_limit = 0;
    bool mem_growth = false, print_config = false, deterministic = false;
    std::string out, math;
  };
  auto st = std::make_shared<State>();
  CLI::App* sub = app.add_subcommand("fit", "Train the model described by a YAML config");
  st->cf.add_to(sub, true);
  sub->add_option("--mem-limit", st->mem_limit,
                  "Hard cap in MiB on all memory the tool allocates on the device (GPU) [default: no cap]")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  sub->add_flag("--mem-growth", st->mem_growth,
                "GPU: start small and grow on demand up to --mem-limit, instead of reserving up front");
  sub->add_option("--math", st->math, "fp32 (strict, the default) | tf32 (GPU tensor cores) [default: config's math]")
      ->check(CLI::IsMember({"fp32", "tf32"}));
  sub->add_flag("--deterministic", st->deterministic, "GPU: deterministic cuDNN algorithms only");
  sub->add_flag("--print-config", st->print_config, "Print the resolved config (defaults filled) and exit");
  sub->add_option("--out", st->out, "Run directory for config.yaml, metrics.csv and summary.json [default: none]");
  sub->callback([st]() {
    ConfigFlags cf = st->cf;
    if (!st->math.empty()) cf.sets.push_back("math=" + st->math);
    if (st->deterministic) cf.sets.push_back("train.deterministic=true");
    Config cfg = cf.load();
    if (st->print_config) {
      Model model(cfg.input_shape, cfg.layers, cfg.init, cfg.file);  // validates every layer
      YAML::Node resolved = cfg.resolved;
      resolved["model"]["layers"] = model.describe_layers();
      resolved["data"]["train"] = describe_source(cfg.data.train, "data.train", cfg.file);
      if (present(cfg.data.validation))
        resolved["data"]["validation"] = describe_source(cfg.data.validation, "data.validation", cfg.file);
      std::cout << YAML::Dump(resolved) << std::endl;
      return;
    }
    FitOptions fo;
    fo.device.device = cfg.device;
    fo.device.mem_limit_bytes = size_t(st->mem_limit) << 20;
    fo.device.mem_growth = st->mem_growth;
    fo.device.math = cfg.math;
    fo.device.deterministic = cfg.deterministic;
    fo.out_dir = st->out;
    fit(cfg, fo, std::cout);
  });
}

}  // namespace trainer::cmd
