// trainer help [TOPIC]: the layer types (help layers), the config reference (help config, as
// `trainer schema --markdown`) or one key (help optimizer.nesterov, help conv2d.padding), printed
// from the key declarations (lib/schema/key_help.h). An unknown key is a usage error (exit 2)
// naming the closest key.
#include <iostream>
#include <memory>
#include <string>

#include "cmd/commands.h"
#include "lib/schema/config_markdown.h"
#include "lib/schema/key_help.h"

namespace trainer::cmd {

void add_help_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "help",
      "Document the config: help layers, help config (every key), help KEY (e.g. optimizer.nesterov)");
  auto topic = std::make_shared<std::string>();
  sub->add_option("topic", *topic, "layers, config, or a key: optimizer.nesterov, data.train.format, conv2d");
  sub->callback([topic]() {
    if (topic->empty())
      std::cout << help_topics();
    else if (*topic == "layers")
      std::cout << layer_listing();
    else if (*topic == "config")
      std::cout << config_markdown();
    else
      std::cout << key_help(*topic);
  });
}

}  // namespace trainer::cmd
