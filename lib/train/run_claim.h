// RunClaim: fit's run directory, checked and locked before the data is read or the model built,
// so that a wrong --resume or --out fails at once instead of after loading 60,000 samples.
//
//   claim_resume_dir  --resume DIR: DIR exists, is locked (RunLock), and holds a readable
//                     newest checkpoint (a damaged state file is a DataError naming it).
//   claim_out_dir     --out DIR: created unless it exists, locked, and holding no run yet; an
//                     existing DIR must be one a run has used (its run.lock) holding only the
//                     files a run writes (lib/train/run_files.h).
// Both remove the temporary files that killed runs left (run_lock.h). A run that fails before it
// writes its first record calls release_unused(): a directory it created is removed again.
#pragma once

#include <memory>
#include <string>

#include "lib/train/checkpointing.h"
#include "lib/train/run_lock.h"

namespace trainer {

struct RunClaim {
  std::string dir;                // "" without a run directory (--no-out)
  std::unique_ptr<RunLock> lock;  // held for the run's whole life
  CheckpointInfo newest;          // --resume: the checkpoint to continue from
  bool created = false;           // --out: made by this run

  // Removes the directory again when this run created it and wrote nothing into it.
  void release_unused();
};

// UsageError for a missing directory or one without checkpoints, or one in use by another run.
// lock=false: only find the newest checkpoint (data-parallel ranks other than 0, which read the
// run directory that rank 0 holds).
RunClaim claim_resume_dir(const std::string& dir, bool lock = true);
// UsageError for a path that exists and is no directory, cannot be created, is in use, holds a
// run with checkpoints (use --resume) or files no run wrote; DataError for a symbolic link among
// the run's files; RuntimeError for a full or failing disk.
RunClaim claim_out_dir(const std::string& dir);

}  // namespace trainer
