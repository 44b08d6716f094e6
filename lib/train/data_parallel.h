// Data parallelism in fit: what the ranks exchange besides the gradients (those the executor
// all-reduces inside each step, lib/model/executor.h).
//
//   all_reduce_sums    an epoch's metric sums over every rank's shard: the figures one process
//                      would have, on every rank, so every rank takes the same decisions (early
//                      stopping, schedules, divergence) without further messages;
//   broadcast_state    rank 0's parameters, buffers and optimizer state, once after start-up or
//                      resume: the replicas start identical;
//   broadcast_buffers  rank 0's buffers (batchnorm running statistics): each rank's follow its own
//                      shards, as in PyTorch DDP; before an evaluation and a checkpoint they are
//                      rank 0's, as DDP's broadcast_buffers makes them.
// With a world of one every function returns at once.
#pragma once

#include "lib/dist/communicator.h"
#include "lib/model/executor.h"
#include "lib/model/model.h"

namespace trainer {

MetricSums all_reduce_sums(Communicator& comm, const MetricSums& local);
void broadcast_state(Communicator& comm, Executor& ex, const Model& model);
void broadcast_buffers(Communicator& comm, Executor& ex, const Model& model);

}  // namespace trainer
