// DeviceCollective: the collectives of data parallelism on device memory (NCCL on the CUDA
// backend, kernels/cuda/nccl_collective.h), one replica per GPU.
//
// Every call enqueues its work on the backend's stream (the asynchronous sums on a side stream
// forked from it and joined back, below) and returns without waiting for the device, so a
// training step that all-reduces its gradients can still be recorded as one CUDA graph and
// replayed. Every replica must make the same calls, with the same counts, in the same
// order (as for the host Communicator, lib/dist/communicator.h). The host Communicator of the same
// replicas carries the one-time exchanges: the unique id each replica joins with, metric sums,
// stop requests, the start-up state.
//
// Made by Backend::join_collective() before the first step, with every byte and object it needs
// (NCCL's buffers, the scratch of the OR below, the side stream and events of the asynchronous
// sums): nothing is allocated or created inside a step.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "lib/backend/layer_kernel.h"

namespace trainer {

class DeviceCollective {
 public:
  virtual ~DeviceCollective() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "NCCL 2.28.9, rank 0 of 2 on gpu:0".
  virtual std::string description() const = 0;

  // The weight of weighted sums: one float of backend memory, read on the device each time a
  // weighted sum runs (so a replayed step uses that step's value). Set once, before the first step.
  virtual void set_weight(const float* weight) = 0;
  // The float sums below travel as `t` from now on (device.gradient_compression; f32: as they are):
  // each replica's values, times its weight for a weighted sum, are rounded to t, NCCL sums them
  // in t, and the sum is widened back into x: half the bytes on the wire, at t's precision.
  // Allocates the staging of up to max_floats values of t here, before the first step; a sum of
  // more is an internal error. Set once.
  virtual void compress_sums(DType t, int64_t max_floats) = 0;
  // The dtype float sums travel in (f32 until compress_sums).
  virtual DType sums_dtype() const = 0;
  // In place over every replica: x[i] = sum over replicas r of x_r[i], or with `weighted` of
  // w_r * x_r[i] (w_r: each replica's own weight, set_weight()). x: n floats of backend memory.
  virtual void all_reduce_sum(float* x, int64_t n, bool weighted) = 0;
  // The same sum, overlapped with what the backend's stream does next (gradient buckets reduced
  // while the backward pass goes on, lib/model/gradient_buckets.h): it starts once the work
  // enqueued on the backend's stream so far is done, and runs beside the work enqueued after it.
  // Until wait_all(), nothing enqueued later on the backend's stream may read or write x, nor
  // call another collective of this replica (the flag OR, a broadcast, a synchronous sum).
  // Several asynchronous sums run one after another, in the order they were enqueued. The
  // default is the synchronous sum (one stream: nothing overlaps).
  virtual void all_reduce_sum_async(float* x, int64_t n, bool weighted) { all_reduce_sum(x, n, weighted); }
  // Joins the asynchronous sums: work enqueued on the backend's stream after this call runs after
  // all of them. Nothing pending: does nothing. Enqueues only; never waits on the host (inside a
  // recorded step, the fork and the join become edges of the graph).
  virtual void wait_all() {}
  // In place over every replica: x[i] = sum over replicas r of x_r[i], x: n doubles of backend
  // memory (synchronized batchnorm's per-channel sums, lib/core/batchnorm_sync_formula.h). Joins the
  // asynchronous sums first (as wait_all()), so it may be called while gradient buckets are in
  // flight: the communicator runs one collective after another, in the same order on every replica.
  virtual void all_reduce_sum(double* x, int64_t n) = 0;
  // In place: *word = the bitwise OR of every replica's *word (one uint32 of backend memory: the
  // step's non-finite flags, lib/backend/backend.h NonfiniteBits).
  virtual void all_reduce_or(uint32_t* word) = 0;
  // The OR overlapped, as all_reduce_sum_async: the bits *word holds when the backend's stream gets
  // here are ORed over the replicas beside the work enqueued after, and the join (wait_all(), or a
  // sum that joins) ORs the result into *word, so bits set in between stay (the step's loss flag,
  // reduced during the backward pass instead of after the gradients). The rules of the
  // asynchronous sums hold until the join; one pending OR at a time. Default: all_reduce_or now.
  virtual void all_reduce_or_async(uint32_t* word) { all_reduce_or(word); }
  // Replica `root`'s n floats to every replica.
  virtual void broadcast(float* x, int64_t n, int root) = 0;

  // Throws RuntimeError when the collective was aborted (another replica failed): called before
  // a recorded step is replayed, since the recording still names the aborted communicator.
  virtual void check_alive() const = 0;
  // A callable that aborts the collective: pending device work that waits for other replicas
  // ends, and later calls throw. Safe from any thread, at any time, also after the collective is
  // destroyed (it then does nothing): a failing replica's thread calls it for all the others
  // (lib/dist/thread_world.h), so none stays blocked on the device.
  virtual std::function<void()> abort_handle() = 0;
};

}  // namespace trainer
