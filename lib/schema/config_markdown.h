// docs/config.md: the config reference in Markdown, printed from the config tree (config_tree.h) by
// `trainer schema --markdown` (and `trainer help config`): one table of keys per section, then per
// variant (each layer type, loss, optimizer, data format, schedule and metric) its line and its own
// keys. Never edited by hand: ctest config_docs_fresh fails when the committed file differs.
#pragma once

#include <string>

namespace trainer {

std::string config_markdown();

}  // namespace trainer
