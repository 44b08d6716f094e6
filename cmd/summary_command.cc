// trainer summary CONFIG: the Keras-style layer table with parameter totals. The config is
// validated exactly as fit validates it: load_config() checks every key (layers, optimizer, data
// sources, device) and make_model() the shapes, output against num_classes and batch size; no data
// file is read.
#include <iostream>

#include "cmd/commands.h"
#include "cmd/config_flags.h"
#include "lib/core/json_text.h"
#include "lib/model/model.h"
#include "lib/train/model_json.h"
#include "lib/train/session.h"

namespace trainer::cmd {

void add_summary_command(CLI::App& app) {
  auto cf = std::make_shared<ConfigFlags>();
  CLI::App* sub =
      app.add_subcommand("summary", "Print the model's layers, output shapes and parameter counts");
  cf->add_to(sub, FlagSet::config_only);
  auto json = std::make_shared<bool>(false);
  sub->add_flag(
      "--json", *json,
      "Print the model as one JSON document instead: every layer in run order (blocks expanded) with "
      "its inputs, output shape, tensor names and shapes and resolved hyper-parameters, and the "
      "resolved config (for scripts/torch_peer.py)");
  sub->callback([cf, json]() {
    Config cfg = cf->load();
    std::unique_ptr<Model> model = make_model(cfg);  // shapes and num_classes, as fit checks them
    if (*json)
      std::cout << trainer::json_text(model_json(cfg, *model), 1) << "\n";
    else
      std::cout << "Model: " << cfg.file << "\n" << model->summary();
  });
}

}  // namespace trainer::cmd
