// Communicator: the processes of one data-parallel run (its ranks) and the collectives they share.
//
// A run started by mpirun (or srun with PMI) has one rank per process (lib/dist/world.h);
// anything else is a world of one, whose collectives return at once. Collectives work on host
// memory and block until every rank has called them, so every rank must call the same ones in
// the same order: the training loop makes sure of it by deciding only on values that were
// all-reduced first (metrics, non-finite flags, stop requests).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "lib/core/error.h"

namespace trainer {

// What a rank throws when it stops because another rank of its world failed (the failure itself
// is that rank's error): the ranks of one process tell the first failure from its consequences.
struct WorldStopped : RuntimeError {
  explicit WorldStopped(const std::string& m) : RuntimeError(m) {}
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Among the ranks on this host (0 .. ranks per host - 1): which GPU a rank takes.
  virtual int local_rank() const = 0;
  // The ranks on this host.
  virtual int local_size() const = 0;
  // "Open MPI v4.1.4, 2 ranks on 1 host", "one process".
  virtual std::string description() const = 0;

  // In place, element-wise over all ranks. Every rank ends with the same values.
  virtual void all_reduce_sum(float* x, int64_t n) = 0;
  virtual void all_reduce_sum(double* x, int64_t n) = 0;
  virtual void all_reduce_max(uint64_t* x, int64_t n) = 0;
  virtual void all_reduce_or(uint32_t* x, int64_t n) = 0;
  // Rank `root`'s bytes to every rank.
  virtual void broadcast(void* x, size_t bytes, int root) = 0;
  // Ends the process of every rank with `exit_code` (MPI_Abort). A world of one just exits.
  [[noreturn]] virtual void abort(int exit_code) = 0;
  // Called, on the failing rank's thread, when a rank of this world fails while the others go on
  // (ranks that are threads of one process, lib/dist/thread_world.h): aborts what could leave
  // them waiting on the device (DeviceCollective::abort_handle). Worlds whose failure ends every
  // process (MPI_Abort) need not keep it.
  virtual void add_failure_hook(std::function<void()> hook) {}

  // True on every rank when `flag` is true on any.
  bool any(bool flag) {
    uint64_t v = flag ? 1 : 0;
    all_reduce_max(&v, 1);
    return v != 0;
  }
  bool is_root() const { return rank() == 0; }
};

// The world of one process: collectives leave their input as it is.
class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_size() const override { return 1; }
  std::string description() const override { return "one process"; }
  void all_reduce_sum(float*, int64_t) override {}
  void all_reduce_sum(double*, int64_t) override {}
  void all_reduce_max(uint64_t*, int64_t) override {}
  void all_reduce_or(uint32_t*, int64_t) override {}
  void broadcast(void*, size_t, int) override {}
  [[noreturn]] void abort(int exit_code) override;
};

}  // namespace trainer
