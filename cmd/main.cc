// trainer: train neural networks from YAML. Verbs: fit, eval, predict, summary, devices (see README).
// Every failure ends here as a one-line message on stderr and a documented exit code.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <yaml-cpp/exceptions.h>

#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <iostream>
#include <new>
#include <unistd.h>

#include "cmd/commands.h"
#include "lib/core/error.h"
#include "lib/train/fit.h"
#include "trainer_version.h"

namespace {

// First SIGINT/SIGTERM: ask fit to stop after the current step (it saves a checkpoint); the
// second one leaves at once (checkpoint files are replaced atomically, so none is left torn).
void on_signal(int) {
  static volatile std::sig_atomic_t count = 0;
  if (++count > 1) _exit(int(trainer::ExitCode::interrupted));
  static const char msg[] = "\nstopping after the current step and saving a checkpoint (again to quit now)\n";
  ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)ignored;
  trainer::request_stop();
}

int fail(trainer::ExitCode code, const std::string& message) {
  std::cout.flush();
  std::fflush(stdout);
  std::cerr << (code == trainer::ExitCode::interrupted ? "" : "error: ") << message << std::endl;
  return int(code);
}

}  // namespace

// OpenMP threads (oneDNN's) spin for ~300k iterations before sleeping. On a machine whose cores
// are busy with other work that spinning starves the threads doing ours: a 2-core run measured
// 38.8 ms/step with one core busy, against 25.1 ms/step with GOMP_SPINCOUNT=3000 and no cost on
// an idle machine (9.7 ms/step either way). libgomp reads the variable when it loads, before
// main, so we set it and re-execute ourselves once, unless the user chose a wait policy.
static void tune_openmp_waiting(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  if (setenv("GOMP_SPINCOUNT", "3000", 1) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure: then run with the defaults
  unsetenv("GOMP_SPINCOUNT");
}

int main(int argc, char** argv) {
  // SIGINT/SIGTERM stay blocked (and pending) across the re-exec until the handlers are in
  // place, so a signal during start-up is handled like any other (the signal mask survives execv).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigprocmask(SIG_BLOCK, &stop_signals, nullptr);
  tune_openmp_waiting(argv);
  auto logger = spdlog::stderr_color_mt("trainer");
  logger->set_pattern("[%Y-%m-%d %H:%M:%S] %^%l%$: %v");
  spdlog::set_default_logger(logger);
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  // A closed stdout (fit ... | head -1) must not end a run: writes fail with EPIPE instead, and
  // fit stops writing there but completes its run directory (lib/train/progress.h).
  std::signal(SIGPIPE, SIG_IGN);
  sigprocmask(SIG_UNBLOCK, &stop_signals, nullptr);

  CLI::App app{"trainer: train neural networks from YAML configs on CPUs (oneDNN) and NVIDIA GPUs (cuDNN/cuBLAS)",
               "trainer"};
  app.set_version_flag("--version", std::string("trainer ") + TRAINER_VERSION);
  app.require_subcommand(1);
  app.fallthrough(false);
  trainer::cmd::add_fit_command(app);
  trainer::cmd::add_summary_command(app);
  trainer::cmd::add_eval_command(app);
  trainer::cmd::add_predict_command(app);
  trainer::cmd::add_devices_command(app);
  trainer::cmd::add_bench_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints CLI11's message and usage
    return int(trainer::ExitCode::usage);
  } catch (const trainer::Error& e) {
    return fail(e.code(), e.what());
  } catch (const YAML::Exception& e) {
    return fail(trainer::ExitCode::config, std::string("config: ") + e.what());
  } catch (const std::bad_alloc&) {
    return fail(trainer::ExitCode::runtime, "out of host memory");
  } catch (const std::exception& e) {
    return fail(trainer::ExitCode::internal, std::string("internal error (please report it): ") + e.what());
  }
  return 0;
}
