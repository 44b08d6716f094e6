// trainer summary CONFIG: the Keras-style layer table with parameter totals. The config is
// validated exactly as fit validates it (model, output against num_classes, batch size, every key
// of the data sources), without reading any data file.
#include <iostream>

#include "cmd/commands.h"
#include "cmd/config_flags.h"
#include "lib/config/node_reader.h"
#include "lib/model/model.h"
#include "lib/train/data_sources.h"
#include "lib/train/session.h"

namespace trainer::cmd {

void add_summary_command(CLI::App& app) {
  auto cf = std::make_shared<ConfigFlags>();
  CLI::App* sub =
      app.add_subcommand("summary", "Print the model's layers, output shapes and parameter counts");
  cf->add_to(sub, FlagSet::config_only);
  sub->callback([cf]() {
    Config cfg = cf->load();
    std::unique_ptr<Model> model = make_model(cfg);
    // In fit's order (lib/train/session.cc load_run_data): validation first, so the first error is the same.
    if (present(cfg.data.validation)) describe_source(cfg.data.validation, "data.validation", cfg.file);
    describe_source(cfg.data.train, "data.train", cfg.file);
    std::cout << "Model: " << cfg.file << "\n" << model->summary();
  });
}

}  // namespace trainer::cmd
