// Flags shared by verbs that read a config: CONFIG, --set, and the dedicated overrides.
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "lib/config/config.h"

namespace trainer::cmd {

struct ConfigFlags {
  std::string path;
  std::vector<std::string> sets;
  // Dedicated flags; applied after --set (they win).
  std::string device;
  int64_t epochs = 0, batch_size = 0;
  int64_t seed = -1;

  void add_to(CLI::App* sub, bool training_flags);
  Config load() const;
};

}  // namespace trainer::cmd
