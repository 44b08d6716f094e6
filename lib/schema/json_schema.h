// `trainer schema`: the config's JSON Schema (draft 2020-12), printed from the config tree
// (config_tree.h), so it checks exactly the declared keys: their types, ranges, allowed values and
// defaults, one line of description each, and through if/then the keys of each layer type, loss,
// optimizer, data format, schedule and metric. docs/trainer.schema.json is its output; editors
// that read `# yaml-language-server: $schema=...` complete and check configs with it.
//
// What it cannot say (constraints between keys, names a config defines, files) is listed in the
// schema's own description; trainer checks those when it loads the config.
#pragma once

#include <string>

namespace trainer {

// The schema as JSON text, indented by 2, ending in a newline.
std::string config_json_schema();

}  // namespace trainer
