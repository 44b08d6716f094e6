// trainer summary CONFIG: the Keras-style layer table with parameter totals.
#include <iostream>

#include "cmd/commands.h"
#include "cmd/config_flags.h"
#include "lib/model/model.h"

namespace trainer::cmd {

void add_summary_command(CLI::App& app) {
  auto cf = std::make_shared<ConfigFlags>();
  CLI::App* sub = app.add_subcommand("summary", "Print the model's layers, output shapes and parameter counts");
  cf->add_to(sub, FlagSet::config_only);
  sub->callback([cf]() {
    Config cfg = cf->load();
    Model model(cfg.input_shape, cfg.layers, cfg.init, cfg.file);
    std::cout << "Model: " << cfg.file << "\n" << model.summary();
  });
}

}  // namespace trainer::cmd
