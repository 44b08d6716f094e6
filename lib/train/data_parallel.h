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
//   join_device_collective  the replicas' device collective (NCCL), once at start-up: replica 0
//                      makes the unique id, the host world hands it to the others, each joins.
//   gradient_reduction  how the executor all-reduces the gradients, for fit's data parallel line.
// With a world of one every function but join_device_collective returns at once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "lib/backend/backend.h"
#include "lib/backend/device_collective.h"
#include "lib/dist/communicator.h"
#include "lib/model/executor.h"
#include "lib/model/model.h"

namespace trainer {

MetricSums all_reduce_sums(Communicator& comm, const MetricSums& local);
void broadcast_state(Communicator& comm, StepRunner& ex, const Model& model);
void broadcast_buffers(Communicator& comm, StepRunner& ex, const Model& model);
// Joins `be` to the device collective of comm's ranks (every rank calls it, collectively), and
// registers its abort with comm's failure hooks. Throws UsageError when the backend has no device
// collectives (a build without NCCL), naming the world.
std::unique_ptr<DeviceCollective> join_device_collective(Communicator& comm, Backend& be);
// "" (on the host), " on the devices (NCCL ...)" (one bucket) or " on the devices in 4 buckets of
// at most 25.00 MiB, overlapped with the backward pass (NCCL ...; sent as bf16)". `collective`:
// null on the host.
std::string gradient_reduction(const DeviceCollective* collective,
                               const std::vector<GradientBucket>& buckets);

}  // namespace trainer
