// The MPI world (compiled only when CMake found MPI: TRAINER_HAVE_MPI). Collectives use the C
// API on MPI_COMM_WORLD with MPI_ERRORS_RETURN, so a failing call becomes a RuntimeError that
// names it instead of MPI's default abort.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "lib/core/error.h"
#include "lib/dist/communicator.h"

namespace trainer {
namespace {

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw RuntimeError(std::string(what) + " failed: " + std::string(text, size_t(std::max(len, 0))));
}

}  // namespace

// "Open MPI v4.1.4": the first part of MPI's own description (callable before MPI_Init).
std::string mpi_library_version() {
  char version[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(version, &len);
  const std::string text(version, size_t(std::max(len, 0)));
  return text.substr(0, text.find_first_of(",\n"));
}

namespace {

// MPI counts are ints: longer vectors go in chunks.
constexpr int64_t kChunk = int64_t(1) << 30;

template <typename T>
void all_reduce(T* x, int64_t n, MPI_Datatype type, MPI_Op op, const char* what) {
  for (int64_t at = 0; at < n; at += kChunk)
    check(MPI_Allreduce(MPI_IN_PLACE, x + at, int(std::min(kChunk, n - at)), type, op, MPI_COMM_WORLD), what);
}

class MpiWorld final : public Communicator {
 public:
  MpiWorld() {
    // Only the main thread calls MPI (the data loader's thread and the signal thread never do).
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
    MPI_Comm host;
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &host),
          "MPI_Comm_split_type");
    check(MPI_Comm_rank(host, &local_rank_), "MPI_Comm_rank");
    check(MPI_Comm_size(host, &local_size_), "MPI_Comm_size");
    MPI_Comm_free(&host);
    int first_on_host = local_rank_ == 0 ? 1 : 0;
    check(MPI_Allreduce(&first_on_host, &hosts_, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    library_ = mpi_library_version();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string description() const override {
    return library_ + ", " + std::to_string(size_) + " ranks on " + std::to_string(hosts_) +
           (hosts_ == 1 ? " host" : " hosts");
  }
  void all_reduce_sum(float* x, int64_t n) override { all_reduce(x, n, MPI_FLOAT, MPI_SUM, "MPI_Allreduce"); }
  void all_reduce_sum(double* x, int64_t n) override {
    all_reduce(x, n, MPI_DOUBLE, MPI_SUM, "MPI_Allreduce");
  }
  void all_reduce_max(uint64_t* x, int64_t n) override {
    all_reduce(x, n, MPI_UINT64_T, MPI_MAX, "MPI_Allreduce");
  }
  void all_reduce_or(uint32_t* x, int64_t n) override {
    all_reduce(x, n, MPI_UINT32_T, MPI_BOR, "MPI_Allreduce");
  }
  void broadcast(void* x, size_t bytes, int root) override {
    auto* p = static_cast<char*>(x);
    for (size_t at = 0; at < bytes; at += size_t(kChunk))
      check(MPI_Bcast(p + at, int(std::min(size_t(kChunk), bytes - at)), MPI_BYTE, root, MPI_COMM_WORLD),
            "MPI_Bcast");
  }
  [[noreturn]] void abort(int exit_code) override {
    std::fflush(nullptr);
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);  // MPI_Abort does not return; if it did, still end this rank
  }

 private:
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, hosts_ = 1;
  std::string library_;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_world() { return std::make_unique<MpiWorld>(); }

void finalize_mpi_world() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace trainer
