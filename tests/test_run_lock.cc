// One run per run directory: the flock on run.lock, the message a second run gets, the lock's
// release when its holder is killed, and the removal of temporary files that killed runs left.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/train/fit.h"
#include "lib/train/run_lock.h"
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
train: {epochs: 1, seed: 7}
)";

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

// A pid that was alive a moment ago and is not now (its process exited and was reaped).
pid_t dead_pid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}

}  // namespace

TEST_CASE("a second fit or --resume on a run directory in use fails at once with exit 2 naming the holder",
          "[run_dir][lock]") {
  std::string dir = test::temp_dir("lock_cli");
  std::string cfg = test::write_file(dir, "tiny.yaml", kTiny);
  const std::string run = dir + "/run";
  REQUIRE(test::run_trainer("fit " + cfg + " --out " + run).exit_code == 0);
  const std::string events = test::slurp(run + "/events.jsonl");
  {
    RunLock held(run, "--out");  // as a running fit holds it
    const std::string holder = "pid " + std::to_string(getpid()) + " on host " + host_name();
    auto fresh = test::run_trainer("fit " + cfg + " --out " + run);
    REQUIRE(fresh.exit_code == 2);
    REQUIRE_THAT(fresh.err, Contains("--out " + run +
                                     ": the run directory is in use by another trainer run (" + holder));
    auto resumed = test::run_trainer("fit " + cfg + " --resume " + run + " --epochs 2");
    REQUIRE(resumed.exit_code == 2);
    REQUIRE_THAT(resumed.err,
                 Contains("--resume " + run + ": the run directory is in use") && Contains(holder));
    REQUIRE(resumed.out.empty());
    REQUIRE(test::slurp(run + "/events.jsonl") == events);  // neither wrote anything
  }
  auto after = test::run_trainer("fit " + cfg + " --resume " + run + " --epochs 2");
  INFO(after.err);
  REQUIRE(after.exit_code == 0);
}

TEST_CASE("the run lock is released when its holder is killed with SIGKILL", "[run_dir][lock]") {
  std::string dir = test::temp_dir("lock_kill");
  int ready[2], hold[2];
  REQUIRE(pipe(ready) == 0);
  REQUIRE(pipe(hold) == 0);
  pid_t child = fork();
  if (child == 0) {
    close(ready[0]);
    close(hold[1]);
    try {
      RunLock lock(dir, "--out");
      char c = 1;
      if (write(ready[1], &c, 1) != 1) _exit(3);
      (void)read(hold[0], &c, 1);  // blocks until killed
    } catch (...) {
      _exit(2);
    }
    _exit(0);
  }
  close(ready[1]);
  close(hold[0]);
  char c = 0;
  REQUIRE(read(ready[0], &c, 1) == 1);
  REQUIRE_THROWS_WITH(RunLock(dir, "--out"), Contains("pid " + std::to_string(child) + " on host "));
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(WIFSIGNALED(status));
  REQUIRE_NOTHROW(RunLock(dir, "--out"));
  close(ready[0]);
  close(hold[1]);
}

TEST_CASE("a rival never names the dead pid that an earlier run left in the lock file", "[run_dir][lock]") {
  std::string dir = test::temp_dir("lock_stale_pid");
  const std::string path = RunLock::file_in(dir);
  { RunLock first(dir, "--out"); }
  REQUIRE(test::slurp(path).empty());  // a run that ends normally leaves no pid behind

  // As a killed run leaves it: its pid, this host. A new holder has locked the file but not yet
  // written its own pid (here: never).
  const pid_t dead = dead_pid();
  std::ofstream(path) << "pid " << dead << "\nhost " << host_name() << "\n";
  int fd = open(path.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  REQUIRE(flock(fd, LOCK_EX | LOCK_NB) == 0);
  REQUIRE_THROWS_WITH(RunLock(dir, "--out"), Contains("its lock file names no holder yet") &&
                                                 !Contains("pid " + std::to_string(dead)));
  close(fd);
  REQUIRE_NOTHROW(RunLock(dir, "--out"));
}

TEST_CASE("temporary files of dead processes are removed when a run resumes, others are kept",
          "[run_dir][lock]") {
  std::string dir = test::temp_dir("stale_tmp");
  const std::string run = dir + "/run";
  Config cfg = parse_config(kTiny, "tiny.yaml", {});
  FitOptions fo;
  fo.out_dir = run;
  std::ostringstream out;
  fit(cfg, fo, out);
  const pid_t dead = dead_pid();
  const std::string stale = run + "/checkpoints/epoch-0002.safetensors.tmp-" + std::to_string(dead);
  const std::string stale_top = run + "/summary.json.tmp-" + std::to_string(dead);
  const std::string live = run + "/checkpoints/epoch-0002.safetensors.tmp-" + std::to_string(getppid());
  const std::string other = run + "/notes.tmp-draft";
  for (const auto& f : {stale, stale_top, live, other}) std::ofstream(f) << "partial";

  Config two = parse_config(kTiny, "tiny.yaml", {"train.epochs=2"});
  FitOptions ro;
  ro.resume_dir = run;
  REQUIRE(fit(two, ro, out).epochs_run == 2);
  REQUIRE_FALSE(fs::exists(stale));
  REQUIRE_FALSE(fs::exists(stale_top));
  REQUIRE(fs::exists(live));  // the test's parent is alive: its file may still be being written
  REQUIRE(fs::exists(other));
  REQUIRE(remove_stale_temp_files(run + "/checkpoints") == 0);
}
