// fit over several GPUs of one process (`trainer fit --device gpu:0,1` or gpu:all): one replica
// per GPU, each a thread that runs the same training loop as an mpirun rank (lib/train/fit.h) with
// its own backend, executor and data loader, as rank r of a ThreadWorld (lib/dist/thread_world.h).
// The replicas join one NCCL communicator (open_session), so each step's gradients are summed on
// the GPUs; the global batch (data.batch_size) is split evenly over them, as over ranks.
//
// Replica 0 alone logs and writes the run directory and `out`; the others print only errors.
// An error in any replica stops the others (their collectives are aborted, their waits end); the
// error that is thrown names the replica that failed first. An interrupt is every replica's: it
// throws replica 0's InterruptedError (which names the checkpoint it saved).
#pragma once

#include <iosfwd>
#include <vector>

#include "lib/train/fit.h"

namespace trainer {

// `gpus`: the GPU indices, one replica each (at least 2, checked by check_gpu_list).
FitResult fit_replicas(const Config& cfg, const FitOptions& opt, const std::vector<int>& gpus,
                       std::ostream& out);

}  // namespace trainer
