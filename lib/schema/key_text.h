// How a declared key reads in docs/config.md and in `trainer help`: the form and range of its value,
// and its default, in words. One place, so the reference and the help say the same.
#pragma once

#include <string>

#include "lib/keys/key_spec.h"
#include "lib/schema/config_tree.h"

namespace trainer {

std::string number_text(double v);           // 1e6, 0.001, 65536
std::string value_text(const KeySpec& k);    // "an integer from 1 to 1048576", "one of: stop, skip"
std::string default_text(const KeySpec& k);  // "0.001", "[0.08, 1]"; "" when it has none
std::string form_text(const ConfigNode& n);  // "a list of layers", "a name, or a mapping"

}  // namespace trainer
