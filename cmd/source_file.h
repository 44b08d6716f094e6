// Files of the source tree that verbs use at run time (configs/mlp_disc.yaml for bench --sweep,
// scripts/plot.py for plot): found in the working directory, else in the directories above the
// trainer binary (build/trainer -> the checkout it was built from), or below share/trainer/ there
// (an installed /usr/bin/trainer -> /usr/share/trainer/scripts/plot.py, the Debian package).
#pragma once

#include <string>

namespace trainer::cmd {

// The path of `relative` ("scripts/plot.py"), or "" when neither place has it.
std::string find_source_file(const std::string& relative, bool binary_first = false);

}  // namespace trainer::cmd
