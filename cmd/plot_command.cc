// trainer plot RUN... [--out file.png|svg]: runs scripts/plot.py (python3 with matplotlib) with the
// same arguments, in place of this process; `trainer plot --help` is the script's help.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <iostream>

#include "cmd/commands.h"
#include "cmd/source_file.h"
#include "lib/core/error.h"

namespace trainer::cmd {

void add_plot_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "plot",
      "Draw runs' loss and metrics per epoch and bench --out results as one PNG or SVG (scripts/plot.py; "
      "trainer plot --help for its arguments)");
  sub->prefix_command();  // everything after "plot" goes to the script, --help included
  sub->set_help_flag();
  sub->callback([sub]() {
    const std::string script = find_source_file("scripts/plot.py", true);
    if (script.empty())
      throw UsageError("plot: no scripts/plot.py above the trainer binary or in this directory");
    std::vector<std::string> args{"python3", script};
    for (const std::string& a : sub->remaining()) args.push_back(a);
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::cout.flush();
    // main() blocks SIGINT/SIGTERM and ignores SIGPIPE; exec keeps both, so give python the defaults.
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_UNBLOCK, &stop, nullptr);
    std::signal(SIGPIPE, SIG_DFL);
    ::execvp("python3", argv.data());
    throw RuntimeError(std::string("plot: cannot run python3: ") + std::strerror(errno) +
                       "; install it (Debian: apt-get install python3-matplotlib)");
  });
}

}  // namespace trainer::cmd
