// What the process does about signals and a closed stdout: fit ... | head -1 completes its run
// directory, and SIGTERM during start-up is a one-line message and exit 130 like any other time.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

const char* kTiny = R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 8}, {type: relu}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: adam, lr: 0.01}
data: {train: {format: disc, samples: 200, seed: 3}, num_classes: 2, batch_size: 20, validation_split: 0.2}
train: {epochs: 3, seed: 7}
)";

enum class Stdout { dev_null, broken_pipe };

struct Exit {
  int code = -1;  // exit status, or -1 when killed by a signal
  int signal = 0;
  std::string err;
};

// Runs the trainer with stderr captured. broken_pipe: stdout is a pipe whose read end is closed
// before the trainer starts, so every write to it fails (as after `| head -1` has exited).
// pending_signal (SIGTERM, SIGINT, SIGHUP; 0: none): already pending (blocked) when the trainer is
// executed, so it arrives before anything else happens, whatever the machine's load.
Exit spawn(const std::vector<std::string>& args, Stdout out, int pending_signal,
           const std::string& err_path) {
  pid_t pid = fork();
  if (pid == 0) {
    if (out == Stdout::broken_pipe) {
      int fds[2];
      if (pipe(fds) != 0) _exit(90);
      close(fds[0]);
      dup2(fds[1], STDOUT_FILENO);
    } else {
      dup2(open("/dev/null", O_WRONLY), STDOUT_FILENO);
    }
    dup2(open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), STDERR_FILENO);
    signal(SIGPIPE, SIG_DFL);  // as a shell leaves it
    if (pending_signal) {
      unsetenv("OMP_WAIT_POLICY");  // take the re-exec path too: the signal must survive it
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, pending_signal);
      sigprocmask(SIG_BLOCK, &set, nullptr);
      kill(getpid(), pending_signal);
    }
    std::vector<char*> argv{const_cast<char*>(TRAINER_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(TRAINER_BINARY, argv.data());
    _exit(91);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  Exit e;
  if (WIFEXITED(status)) e.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) e.signal = WTERMSIG(status);
  e.err = test::slurp(err_path);
  return e;
}

}  // namespace

TEST_CASE("fit with a closed stdout goes on and completes its run directory", "[signals][run_dir]") {
  std::string dir = test::temp_dir("sigpipe");
  std::string cfg = test::write_file(dir, "tiny.yaml", kTiny);
  const std::string run = dir + "/run";
  Exit e = spawn({"fit", cfg, "--out", run}, Stdout::broken_pipe, 0, dir + "/err");
  INFO(e.err);
  REQUIRE(e.signal == 0);
  REQUIRE(e.code == 0);
  REQUIRE_THAT(e.err, Contains("warning: stdout: the output stream is closed"));
  REQUIRE(fs::exists(run + "/model.safetensors"));
  REQUIRE(fs::exists(run + "/checkpoints/epoch-0003.state.safetensors"));
  auto summary = nlohmann::json::parse(test::slurp(run + "/summary.json"));
  REQUIRE(summary["status"] == "completed");
  REQUIRE(summary["epochs_run"] == 3);
  const std::string events = test::slurp(run + "/events.jsonl");
  REQUIRE_THAT(events, Contains("\"event\":\"end\""));
}

TEST_CASE("SIGTERM during start-up stops before the first step with one message and exit 130", "[signals]") {
  std::string dir = test::temp_dir("sigterm_start");
  std::string cfg = test::write_file(dir, "tiny.yaml", kTiny);
  Exit e = spawn({"fit", cfg, "--out", dir + "/run"}, Stdout::dev_null, SIGTERM, dir + "/err");
  INFO(e.err);
  REQUIRE(e.signal == 0);
  REQUIRE(e.code == 130);
  REQUIRE_THAT(e.err, Contains("interrupted before training started; nothing was trained or saved"));
  REQUIRE_FALSE(fs::exists(dir + "/run/checkpoints/epoch-0001.safetensors"));
}

// eval, predict and bench CONFIG have nothing to save: the first SIGINT or SIGTERM ends them
// with exit 130 (they used to print "saving a checkpoint (again to quit now)" and go on). SIGHUP
// (a closed terminal) stops fit as SIGTERM does. The signal is pending when the trainer starts, so
// it arrives at a known moment; a later one takes the same path (the signal thread).
TEST_CASE("the first SIGINT or SIGTERM ends eval, predict and bench with exit 130; SIGHUP stops fit",
          "[signals]") {
  const std::string dir = test::temp_dir("signal_verbs");
  const std::string cfg = test::write_file(dir, "tiny.yaml", kTiny);
  const std::string input = test::write_file(dir, "x.csv", "0.1,0.2\n0.3,0.4\n");
  REQUIRE(test::run_trainer("fit " + cfg + " --epochs 1 --out " + dir + "/run").exit_code == 0);
  const std::vector<std::pair<std::vector<std::string>, int>> cases = {
      {{"eval", cfg, "--weights", dir + "/run"}, SIGINT},
      {{"eval", dir + "/run"}, SIGTERM},
      {{"predict", cfg, "--weights", dir + "/run", "--input", input, "--output", dir + "/p.csv"}, SIGINT},
      {{"bench", cfg}, SIGTERM},
  };
  for (const auto& [args, sig] : cases) {
    CAPTURE(args[0], sig);
    Exit e = spawn(args, Stdout::dev_null, sig, dir + "/err");
    INFO(e.err);
    REQUIRE(e.signal == 0);
    REQUIRE(e.code == 130);
    REQUIRE_THAT(e.err, Contains("interrupted") && !Contains("saving a checkpoint"));
  }
  REQUIRE_FALSE(fs::exists(dir + "/p.csv"));
  Exit hup = spawn({"fit", cfg, "--out", dir + "/hup"}, Stdout::dev_null, SIGHUP, dir + "/err");
  INFO(hup.err);
  REQUIRE(hup.code == 130);
  REQUIRE_THAT(hup.err, Contains("interrupted before training started; nothing was trained or saved"));
}

// A crash (a bug; the signal is sent here) names the thread and prints the stack, then ends the
// process with that signal, as without the handler (cmd/crash_report.h). Sanitizer builds keep
// their own handler (its report says more), so the case is skipped there, visibly.
TEST_CASE("a fatal signal prints an internal-error report with the stack and ends with that signal",
          "[signals][crash]") {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  WARN("SKIPPED: sanitizer build (AddressSanitizer reports fatal signals itself)");
  return;
#endif
  std::string dir = test::temp_dir("crash_report");
  std::string cfg = test::write_file(dir, "tiny.yaml", kTiny);
  const std::string err_path = dir + "/err";
  pid_t pid = fork();
  if (pid == 0) {
    dup2(open("/dev/null", O_WRONLY), STDOUT_FILENO);
    dup2(open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644), STDERR_FILENO);
    execl(TRAINER_BINARY, TRAINER_BINARY, "fit", cfg.c_str(), "--epochs", "100000", "--no-out", nullptr);
    _exit(91);
  }
  // Once it trains (epoch lines go to stdout; stderr says when memory is reserved for the first
  // step), the signal lands in the middle of the work.
  for (int i = 0; i < 600 && test::slurp(err_path).find("memory reserved") == std::string::npos; ++i)
    usleep(50000);
  usleep(200000);
  kill(pid, SIGSEGV);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string err = test::slurp(err_path);
  INFO(err << "\nwait status " << status);
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGSEGV);
  CHECK_THAT(err, Contains("trainer: internal error: segmentation fault in thread '") &&
                      Contains("This is a bug in trainer: please report it with this stack.") &&
                      Contains("trainer(+0x"));
}
