// trainer: train neural networks from YAML. Verbs: fit, eval, predict, export, summary, devices, bench,
// plot, schema, help (see README).
// Every failure ends here as a one-line message on stderr and a documented exit code.
#include <pthread.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>
#include <yaml-cpp/exceptions.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <new>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "cmd/commands.h"
#include "cmd/config_flags.h"
#include "cmd/crash_report.h"
#include "cmd/usage_hints.h"
#include "datasets/file_bytes.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/register_backends.h"
#include "lib/backend/backend_registry.h"
#include "lib/core/error.h"
#include "lib/core/printable.h"
#include "lib/dist/world.h"
#include "lib/registry/registry.h"
#include "lib/train/fit.h"
#include "trainer_build_info.h"
#include "trainer_git_commit.h"
#include "trainer_version.h"

namespace {

// SIGINT and SIGTERM are never delivered to a handler: every thread blocks them and one thread,
// "trainer-signals", takes them with sigwait(). A handler runs on whatever thread the signal
// interrupts, and the kernel writes its signal frame (the registers and their xsave state, 3 KB
// with AVX-512) just below that thread's rsp. oneDNN's JIT f32 GEMM kernels point rsp into a
// heap workspace while they run (their packing buffer), so a signal that landed in one wrote that
// frame over malloc's chunk headers below the workspace, and the run aborted in a later free()
// (exit 134, "corrupted size vs. prev_size"; tests/test_signal_threads.cc).
//
// Only fit can stop gracefully (finish the step, save a checkpoint); it is the verb that claims
// the first signal. Every other verb (eval, predict, bench, ...) has nothing to save: the first
// signal ends it at once with exit 130. Decided from argv before any signal is taken.
std::atomic<bool> g_signal_saves_checkpoint{false};

// First signal: ask fit to stop after the current step (it saves a checkpoint); the second one
// leaves at once (checkpoint files are replaced atomically, so none is left torn). Runs on the
// signal thread only (or on main before that thread starts), so it may do anything; it does no
// more than a handler could.
void on_stop_signal() {
  static int count = 0;
  if (!g_signal_saves_checkpoint.load()) {
    static const char msg[] = "\ninterrupted\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    _exit(int(trainer::ExitCode::interrupted));
  }
  if (++count > 1) _exit(int(trainer::ExitCode::interrupted));
  static const char msg[] = "\nstopping after the current step and saving a checkpoint (again to quit now)\n";
  ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)ignored;
  trainer::request_stop();
}

// The verb of the command line: its first argument that is not a flag ("" when none).
std::string verb_of(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (argv[i][0] != '-') return argv[i];
  return "";
}

// Called with `signals` blocked, before any other thread exists (threads inherit the mask): handles
// the ones already pending (sent before the trainer started, or during its start-up), then starts
// the thread that waits for the others.
void start_signal_thread(const sigset_t& signals) {
  const timespec now{0, 0};
  while (sigtimedwait(&signals, nullptr, &now) > 0) on_stop_signal();
  try {
    std::thread([signals] {
      pthread_setname_np(pthread_self(), "trainer-signals");
      for (;;) {
        int sig = 0;
        if (sigwait(&signals, &sig) == 0) on_stop_signal();
      }
    }).detach();
  } catch (const std::system_error&) {
    // No thread: the signals end the process as they do by default (no checkpoint is saved).
    pthread_sigmask(SIG_UNBLOCK, &signals, nullptr);
  }
}

// Messages quote what the user gave (paths, keys, values, arguments): printable() escapes control
// and non-UTF-8 bytes, so the message stays one line and nothing raw reaches the terminal.
// Data parallel (mpirun): errors name the rank; an interrupt is every rank's (they stop together)
// and only rank 0 reports it.
int fail(trainer::ExitCode code, const std::string& message) {
  std::cout.flush();
  std::fflush(stdout);
  const trainer::Communicator* world = trainer::joined_world();
  if (world && code == trainer::ExitCode::interrupted && !world->is_root()) return int(code);
  const std::string rank =
      world ? "rank " + std::to_string(world->rank()) + " of " + std::to_string(world->size()) + ": " : "";
  std::cerr << (code == trainer::ExitCode::interrupted ? "" : "error: ") << rank
            << trainer::printable(message) << std::endl;
  return int(code);
}

// The end of a process that joined a world of several ranks: a success or an interrupt happens on
// every rank at the same step, so they leave MPI together; any other error is this rank's alone,
// and the others may be waiting for it in a collective: MPI_Abort ends them all with its code.
int leave_world(int code) {
  trainer::Communicator* world = trainer::joined_world();
  if (world && code != 0 && code != int(trainer::ExitCode::interrupted)) world->abort(code);
  trainer::finalize_world();
  return code;
}

// The verb being run ("fit"), or "" before one was recognized.
std::string current_verb(const CLI::App& app) {
  const auto parsed = app.get_subcommands();
  return parsed.empty() ? "" : parsed.back()->get_name();
}

// Every usage error is one line that points at the verb's --help.
int usage_error(const CLI::App& app, std::string message) {
  const std::string verb = current_verb(app);
  for (char& ch : message)
    if (ch == '\n') ch = ' ';
  while (!message.empty() && message.back() == ' ') message.pop_back();
  return fail(trainer::ExitCode::usage,
              message + "; run 'trainer " + (verb.empty() ? "" : verb + " ") + "--help' for usage");
}

// CLI11 accepts "" for any option; an empty path, device or --set is always a mistake (an empty
// --out would silently mean the default run directory).
void refuse_empty_values(CLI::App& app) {
  const CLI::Validator non_empty(
      [](std::string& value) { return value.empty() ? std::string("must not be empty") : std::string(); },
      "");
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    for (CLI::Option* opt : sub->get_options([](CLI::Option* o) { return o->get_type_size_min() > 0; }))
      opt->check(non_empty);
}

// trainer --version: the release, the commit and what the build was made with.
std::string version_text() {
  std::string cuda = TRAINER_BUILD_CUDA;
  std::string text =
      std::string("trainer ") + TRAINER_VERSION + " (commit " + TRAINER_GIT_COMMIT + ")\n" +
      "compiler: " + TRAINER_BUILD_COMPILER + ", C++" + std::to_string(__cplusplus / 100 % 100) + "\n" +
      "oneDNN: " + trainer::CpuBackend::onednn_version() + " (built against " + TRAINER_BUILD_ONEDNN + ")\n";
  const std::string mpi = trainer::mpi_library();
  text += "MPI: " + (mpi.empty() ? std::string("none (mpirun runs are refused)") : mpi) + "\n";
  if (cuda.empty())
    text += "CUDA: none (a CPU-only build)";
  else
    text += "CUDA: " + cuda + ", cuDNN " + TRAINER_BUILD_CUDNN + ", GPU architectures " +
            TRAINER_BUILD_CUDA_ARCHS + "\nNCCL: " +
            (std::string(TRAINER_BUILD_NCCL).empty() ? std::string("none (one GPU per process)")
                                                     : std::string(TRAINER_BUILD_NCCL));
  return text;
}

}  // namespace

static int run(int argc, char** argv) {
  // SIGINT/SIGTERM are blocked first thing, before any thread exists, and stay blocked in every
  // thread for the whole run (see on_stop_signal); a signal during start-up is handled like any other.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);  // a closed terminal: save and stop, as SIGTERM
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  g_signal_saves_checkpoint = verb_of(argc, argv) == "fit";
  // NO_COLOR (https://no-color.org): any non-empty value turns the coloured log levels off.
  const char* no_color = std::getenv("NO_COLOR");
  auto logger = spdlog::stderr_color_mt(
      "trainer", no_color && *no_color ? spdlog::color_mode::never : spdlog::color_mode::automatic);
  logger->set_pattern("[%Y-%m-%d %H:%M:%S] %^%l%$: %v");
  spdlog::set_default_logger(logger);
  // TRAINER_LOG_LEVEL=debug shows the planning details (e.g. each convolution's algorithms).
  if (const char* level = std::getenv("TRAINER_LOG_LEVEL"); level && *level) {
    const spdlog::level::level_enum l = spdlog::level::from_str(level);
    if (l == spdlog::level::off && std::string(level) != "off")
      spdlog::warn("TRAINER_LOG_LEVEL='{}' is not a level (trace, debug, info, warn, error, off); ignored",
                   level);
    else
      spdlog::set_level(l);
    // Planning's debug lines come milliseconds apart: where a cold start's time goes shows only
    // with them.
    if (l <= spdlog::level::debug) logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] %^%l%$: %v");
  }
  // A closed stdout (fit ... | head -1) must not end a run: writes fail with EPIPE instead, and
  // fit stops writing there but completes its run directory (lib/train/progress.h).
  std::signal(SIGPIPE, SIG_IGN);
  trainer::cmd::install_crash_report();
  // Reads of data files check the stop request between chunks, so a signal interrupts loading.
  trainer::set_read_stop_check(trainer::stop_requested);
  start_signal_thread(stop_signals);
  // Every backend of this build and its kernels: the one registration (lib names no backend).
  trainer::register_backends(trainer::BackendRegistry::global(), trainer::Registry::global());

  CLI::App app{
      "trainer: train neural networks from YAML configs on CPUs (oneDNN) and NVIDIA GPUs (cuDNN/cuBLAS)",
      "trainer"};
  app.set_version_flag("--version", version_text);
  app.require_subcommand(1);
  app.fallthrough(false);
  trainer::cmd::add_fit_command(app);
  trainer::cmd::add_summary_command(app);
  trainer::cmd::add_eval_command(app);
  trainer::cmd::add_predict_command(app);
  trainer::cmd::add_generate_command(app);
  trainer::cmd::add_export_command(app);
  trainer::cmd::add_devices_command(app);
  trainer::cmd::add_bench_command(app);
  trainer::cmd::add_plot_command(app);
  trainer::cmd::add_schema_command(app);
  trainer::cmd::add_help_command(app);
  refuse_empty_values(app);
  try {
    trainer::cmd::check_thread_environment();
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const std::string verb = current_verb(app);
    if (verb.empty() && (argc == 1 || argv[1][0] != '-')) {  // no verb, or not a verb
      if (argc > 1) return usage_error(app, trainer::cmd::unknown_verb_message(app, argv[1]));
      std::string verbs;
      for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
        verbs += (verbs.empty() ? "" : ", ") + sub->get_name();
      return usage_error(app, "a verb is required; verbs: " + verbs);
    }
    const std::vector<std::string> args(argv + 1, argv + argc);
    const CLI::App* sub = verb.empty() ? nullptr : app.get_subcommand(verb);
    const std::string unknown_flag = trainer::cmd::unknown_flag_message(app, sub, args);
    const std::string repeated = trainer::cmd::repeated_option_message(sub, args);
    return usage_error(app, !unknown_flag.empty() ? unknown_flag
                            : !repeated.empty()   ? repeated
                                                  : std::string(e.what()));
  } catch (const trainer::UsageError& e) {
    return usage_error(app, e.what());
  } catch (const trainer::Error& e) {
    return fail(e.code(), e.what());
  } catch (const YAML::Exception& e) {
    return fail(trainer::ExitCode::config, std::string("config: ") + e.what());
  } catch (const std::bad_alloc&) {
    return fail(trainer::ExitCode::runtime, "out of host memory");
  } catch (const std::length_error& e) {  // a size no container can hold: memory, as bad_alloc
    return fail(trainer::ExitCode::runtime, std::string("out of host memory (") + e.what() + ")");
  } catch (const std::filesystem::filesystem_error& e) {
    // A file system refusal: the disk's (full, failing) is a runtime error, the rest (a
    // directory where a file belongs, permissions) is the data's.
    const int err = e.code().value();
    const bool disk = err == ENOSPC || err == EDQUOT || err == EIO || err == EROFS;
    return fail(disk ? trainer::ExitCode::runtime : trainer::ExitCode::data, e.what());
  } catch (const std::system_error& e) {  // threads or other resources the system refused
    return fail(trainer::ExitCode::runtime, std::string("the system refused a resource: ") + e.what());
  } catch (const std::exception& e) {
    return fail(trainer::ExitCode::internal, std::string("internal error (please report it): ") + e.what());
  }
  return 0;
}

int main(int argc, char** argv) { return leave_world(run(argc, argv)); }
