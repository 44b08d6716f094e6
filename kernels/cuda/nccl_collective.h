// NcclCollective: the device collectives (lib/backend/device_collective.h) of one replica over NCCL,
// on one CudaBackend's device and stream. Compiled only in a build with NCCL (TRAINER_HAVE_NCCL).
//
// One communicator per replica (ncclCommInitRank: the replica's thread or process joins with the
// unique id replica 0 made). Shard weighting is folded into the sum: a PreMulSum reduction reads
// each replica's weight from device memory when it runs. The flag OR spreads the word's bits into
// 32 bytes, reduces them with max and folds them back (kernels/cuda/flag_bits.cuh); the 32 bytes
// are allocated when the replica joins, from the backend's capped allocator.
//
// NCCL_NVLS_ENABLE: NVLink SHARP (multicast) is left off unless the environment sets it: the lent
// machines refuse multicast objects (docs/parallel.md, "Several GPUs").
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/backend/device_collective.h"

namespace trainer {

class CudaBackend;

// NCCL's unique id (NCCL_UNIQUE_ID_BYTES bytes).
std::vector<uint8_t> nccl_unique_id();
// Joins the communicator `id` as rank `rank` of `size` on the backend's device; blocks until all
// ranks have joined.
std::unique_ptr<DeviceCollective> join_nccl(CudaBackend& be, const std::vector<uint8_t>& id, int rank,
                                            int size);
// "NCCL 2.28.9": the library this process runs with.
std::string nccl_library();

}  // namespace trainer
