#include "lib/train/run_claim.h"

#include <spdlog/spdlog.h>

#include <cerrno>
#include <filesystem>
#include <vector>

#include "lib/core/error.h"
#include "lib/train/run_dir.h"
#include "lib/train/run_files.h"

namespace fs = std::filesystem;

namespace trainer {
namespace {

// Before anything in the directory is read or written: another run holding it is a usage error.
std::unique_ptr<RunLock> lock_run_dir(const std::string& dir, const std::string& flag) {
  refuse_links_in_run_dir(dir, flag);
  auto lock = std::make_unique<RunLock>(dir, flag);
  int removed = 0;
  for (const std::string& d : {dir, RunDir::checkpoints_of(dir)}) removed += remove_stale_temp_files(d);
  if (removed) spdlog::info("removed {} temporary file(s) left in {} by killed runs", removed, dir);
  return lock;
}

}  // namespace

RunClaim claim_resume_dir(const std::string& dir, bool lock) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw UsageError("--resume " + dir + ": no such run directory");
  RunClaim c;
  c.dir = dir;
  if (lock) c.lock = lock_run_dir(dir, "--resume");
  std::vector<std::string> unreadable;
  auto cks = list_checkpoints(RunDir::checkpoints_of(dir), &unreadable);
  // A state file is written last and atomically, so one that cannot be read is damage, not a
  // crash mid-write: refuse rather than silently resume from an older checkpoint.
  if (!unreadable.empty())
    throw DataError(
        "--resume " + dir + ": " + unreadable.front() +
        (unreadable.size() > 1 ? " (and " + std::to_string(unreadable.size() - 1) + " more)" : "") +
        "; move the damaged checkpoint away to resume from an older one");
  if (cks.empty()) throw UsageError("--resume " + dir + ": no checkpoint in " + RunDir::checkpoints_of(dir));
  c.newest = cks.back();
  return c;
}

RunClaim claim_out_dir(const std::string& dir) {
  std::error_code ec;
  const bool existed = fs::exists(dir, ec);
  if (existed && !fs::is_directory(dir, ec))
    throw UsageError("--out " + dir + ": exists and is not a directory; choose another --out");
  fs::create_directories(dir, ec);
  // A path that cannot be a directory (below a file, in /proc, without permission) is the
  // user's to change (usage); a full or failing disk is not.
  const int err = ec.value();
  if (ec && (err == ENOSPC || err == EDQUOT || err == EIO))
    throw RuntimeError("--out " + dir + ": cannot create the directory: " + ec.message());
  if (ec) throw UsageError("--out " + dir + ": cannot create the directory: " + ec.message());
  // An existing directory is trainer's only when a run's lock file is in it and nothing else is:
  // the user's own files (notes, a commented config.yaml) are never written over or removed.
  if (existed) {
    const std::vector<std::string> foreign = foreign_entries(dir);
    std::error_code lock_ec;
    const bool locked_before = fs::exists(fs::symlink_status(RunLock::file_in(dir), lock_ec));
    std::string names;
    for (const auto& f : foreign) names += (names.empty() ? "" : ", ") + f;
    if (!foreign.empty())
      throw UsageError("--out " + dir + " holds files that no trainer run wrote (" + names +
                       (foreign.size() >= 4 ? ", ..." : "") +
                       "): trainer would write over or remove them; choose a new or empty directory");
    if (!locked_before && !fs::is_empty(dir, lock_ec))
      throw UsageError("--out " + dir +
                       " is not empty and no trainer run has used it (it has no run.lock): trainer would "
                       "write over its files; choose a new or empty directory");
  }
  RunClaim c;
  c.dir = dir;
  c.created = !existed;
  try {
    c.lock = lock_run_dir(dir, "--out");
    if (!list_checkpoints(RunDir::checkpoints_of(dir)).empty())
      throw UsageError("--out " + dir + " already holds a run with checkpoints: continue it with --resume " +
                       dir + " or choose another --out");
  } catch (...) {
    c.release_unused();
    throw;
  }
  return c;
}

void RunClaim::release_unused() {
  if (!created) return;
  std::error_code ec;
  if (lock) fs::remove(RunLock::file_in(dir), ec);
  lock.reset();
  fs::remove(RunDir::checkpoints_of(dir), ec);  // only when empty
  fs::remove(dir, ec);
  created = false;
}

}  // namespace trainer
