// The trainer verbs. Each add_*_command registers its CLI11 subcommand and returns nothing; the
// callback runs the verb and throws trainer::Error on failure (main maps it to an exit code).
#pragma once

#include <CLI/CLI.hpp>

namespace trainer::cmd {

void add_fit_command(CLI::App& app);
void add_summary_command(CLI::App& app);
void add_devices_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_predict_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_plot_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_schema_command(CLI::App& app);
void add_help_command(CLI::App& app);

}  // namespace trainer::cmd
