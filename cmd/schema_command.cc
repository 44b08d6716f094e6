// trainer schema [--markdown]: the config's JSON Schema (draft 2020-12), or with --markdown the
// config reference; both printed from the key declarations that validate configs (lib/schema).
// docs/trainer.schema.json and docs/config.md are their output, kept fresh by ctest
// config_docs_fresh.
#include <iostream>
#include <memory>

#include "cmd/commands.h"
#include "lib/schema/config_markdown.h"
#include "lib/schema/json_schema.h"

namespace trainer::cmd {

void add_schema_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "schema",
      "Print the config's JSON Schema for editors (docs/trainer.schema.json), or the config reference "
      "(--markdown, docs/config.md)");
  auto markdown = std::make_shared<bool>(false);
  sub->add_flag("--markdown", *markdown, "print the config reference in Markdown instead (docs/config.md)");
  sub->callback([markdown]() { std::cout << (*markdown ? config_markdown() : config_json_schema()); });
}

}  // namespace trainer::cmd
