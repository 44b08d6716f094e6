// RunLock: one training run per run directory at a time.
//
// A run (fit --out DIR, or fit --resume DIR) holds an exclusive flock(2) on DIR/run.lock for its
// whole life, taken before it reads or writes anything else in DIR. The file holds the holder's
// pid and host ("pid 4242\nhost build-7\n") so that a second run can say who has the directory.
// The kernel drops the lock when the holder's descriptor closes: on a normal exit, on an
// exception, on kill -9. The file itself stays behind, emptied by a holder that ends normally; it
// means nothing without the lock, and a rival never names a dead pid that a killed run left in it.
//
// While it holds the lock a run also removes "<name>.tmp-<pid>" files (lib/checkpoint/
// atomic_file.h) that a killed process left in DIR and DIR/checkpoints: those whose pid is no
// live process.
#pragma once

#include <string>

namespace trainer {

class RunLock {
 public:
  // Takes the lock on dir/run.lock (dir must exist). Throws UsageError naming the holder's pid and
  // host when another process holds it; `flag` ("--out", "--resume") starts the message.
  RunLock(const std::string& dir, const std::string& flag);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  static std::string file_in(const std::string& dir) { return dir + "/run.lock"; }

 private:
  int fd_ = -1;
};

// Removes "<run file>.tmp-<pid>" files directly in `dir` whose pid is not a live process (kill(pid, 0)
// fails with ESRCH). Returns how many were removed. Call it only while holding the RunLock.
int remove_stale_temp_files(const std::string& dir);

}  // namespace trainer
