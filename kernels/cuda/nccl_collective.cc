// NCCL collectives of one replica (see the header). Every NCCL call is checked: a failure throws
// RuntimeError naming the call, file:line, the device, NCCL's error string and its last error.
#include "kernels/cuda/nccl_collective.h"

#include <nccl.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/flag_bits.cuh"
#include "lib/core/error.h"
#include "lib/dist/communicator.h"

namespace trainer {
namespace {

[[noreturn]] void throw_nccl_error(ncclResult_t r, ncclComm_t comm, const char* call, const char* file,
                                   int line) {
  std::string text = std::string(ncclGetErrorString(r)) + " (ncclResult " + std::to_string(int(r)) + ")";
  const char* last = ncclGetLastError(comm);
  if (last && *last) text += "; " + std::string(last);
  if (r == ncclSystemError || r == ncclRemoteError)
    text += "; set NCCL_DEBUG=WARN (or INFO) for NCCL's own account";
  cuda::throw_call_error("NCCL", call, file, line, text);
}

}  // namespace
}  // namespace trainer

// `comm` names the communicator whose last error to report (nullptr before one exists).
#define NCCL_CHECK(comm, call)                                                    \
  do {                                                                            \
    const ncclResult_t trainer_r_ = (call);                                       \
    if (trainer_r_ != ncclSuccess)                                                \
      ::trainer::throw_nccl_error(trainer_r_, (comm), #call, __FILE__, __LINE__); \
  } while (0)

namespace trainer {
namespace {

// NVLink multicast (NVLS) off unless the user asked for it; before any communicator reads the
// environment, once per process (threads of one process join concurrently).
void set_nccl_environment() {
  static std::once_flag once;
  std::call_once(once, [] { setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0); });
}

// The communicator and whether it was aborted, shared with abort handles that may outlive the
// collective (DeviceCollective::abort_handle). The mutex orders enqueues against an abort from
// another thread.
struct CommState {
  std::mutex mu;
  ncclComm_t comm = nullptr;
  bool aborted = false;
};

class NcclCollective final : public DeviceCollective {
 public:
  NcclCollective(CudaBackend& be, const std::vector<uint8_t>& id, int rank, int size)
      : be_(be), rank_(rank), size_(size), state_(std::make_shared<CommState>()) {
    if (id.size() != sizeof(ncclUniqueId))
      throw InternalError("NCCL unique id of " + std::to_string(id.size()) + " bytes, not " +
                          std::to_string(sizeof(ncclUniqueId)));
    ncclUniqueId uid;
    std::memcpy(&uid, id.data(), sizeof uid);
    set_nccl_environment();
    CUDA_CHECK(cudaSetDevice(be_.device()));
    flag_bytes_ = static_cast<uint8_t*>(be_.allocator().allocate(cuda::kFlagBits, "NCCL flag OR scratch"));
    try {
      // The side stream of the asynchronous sums and its fork and join events.
      CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
      CUDA_CHECK(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
      CUDA_CHECK(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
      NCCL_CHECK(nullptr, ncclCommInitRank(&state_->comm, size_, uid, rank_));
    } catch (...) {
      destroy_side_stream();
      be_.allocator().deallocate(flag_bytes_);
      throw;
    }
  }

  ~NcclCollective() override {
    // First the backend's step recordings, which hold this communicator's captured work: NCCL
    // (>= 2.26) destroys or aborts a communicator only once every graph that captured it is gone
    // (it polls for them), so destroying the communicator first hangs forever. Not under the
    // mutex: an abort from another replica's thread may be waiting for exactly these graphs.
    be_.destroy_graphs();
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->comm) {
      if (has_weighted_) ncclRedOpDestroy(weighted_, state_->comm);
      ncclCommDestroy(state_->comm);  // a destructor: nothing to report to
      state_->comm = nullptr;
    }
    destroy_side_stream();
    be_.allocator().deallocate(flag_bytes_);
    if (staging_) be_.allocator().deallocate(staging_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string description() const override {
    return nccl_library() + ", rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
           " on gpu:" + std::to_string(be_.device());
  }

  void set_weight(const float* weight) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    ncclComm_t comm = live_comm();
    if (has_weighted_) NCCL_CHECK(comm, ncclRedOpDestroy(weighted_, comm));
    has_weighted_ = false;
    // ncclScalarDevice: NCCL dereferences the pointer on the device when each reduction runs.
    NCCL_CHECK(comm, ncclRedOpCreatePreMulSum(&weighted_, const_cast<float*>(weight), ncclFloat32,
                                              ncclScalarDevice, comm));
    has_weighted_ = true;
    weight_ = weight;
  }

  void compress_sums(DType t, int64_t max_floats) override {
    if (staging_) throw InternalError("compress_sums called twice");
    if (t == DType::f32) return;
    staging_ = be_.allocator().allocate(size_t(std::max<int64_t>(max_floats, 1)) * dtype_bytes(t),
                                        std::string("gradient all-reduce staging in ") + dtype_name(t));
    compressed_ = t;
    staging_floats_ = max_floats;
  }
  DType sums_dtype() const override { return compressed_; }

  void all_reduce_sum(float* x, int64_t n, bool weighted) override {
    if (n <= 0) return;
    std::lock_guard<std::mutex> lock(state_->mu);
    ncclComm_t comm = live_comm();
    if (weighted && !has_weighted_) throw InternalError("a weighted all-reduce before set_weight()");
    require_joined("all_reduce_sum");
    sum_floats(comm, x, n, weighted, be_.stream());
  }

  // After the join: the side stream's buckets first, then this sum, on the backend's stream.
  void all_reduce_sum(double* x, int64_t n) override {
    wait_all();
    if (n <= 0) return;
    std::lock_guard<std::mutex> lock(state_->mu);
    ncclComm_t comm = live_comm();
    NCCL_CHECK(comm, ncclAllReduce(x, x, size_t(n), ncclFloat64, ncclSum, comm, be_.stream()));
  }

  // Fork: the side stream waits for the backend's stream so far, then reduces beside it.
  void all_reduce_sum_async(float* x, int64_t n, bool weighted) override {
    if (n <= 0) return;
    std::lock_guard<std::mutex> lock(state_->mu);
    ncclComm_t comm = live_comm();
    if (weighted && !has_weighted_) throw InternalError("a weighted all-reduce before set_weight()");
    CUDA_CHECK(cudaEventRecord(fork_, be_.stream()));
    CUDA_CHECK(cudaStreamWaitEvent(side_, fork_, 0));
    sum_floats(comm, x, n, weighted, side_);
    pending_ = true;
  }

  // The flag bytes spread on the backend's stream, reduced on the side stream like a bucket.
  void all_reduce_or_async(uint32_t* word) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    ncclComm_t comm = live_comm();
    if (or_word_) throw InternalError("a second asynchronous OR before wait_all()");
    cuda::launch_spread_flag_bits(word, flag_bytes_, be_.stream());
    CUDA_CHECK(cudaEventRecord(fork_, be_.stream()));
    CUDA_CHECK(cudaStreamWaitEvent(side_, fork_, 0));
    NCCL_CHECK(comm, ncclAllReduce(flag_bytes_, flag_bytes_, size_t(cuda::kFlagBits), ncclUint8, ncclMax,
                                   comm, side_));
    pending_ = true;
    or_word_ = word;
  }

  // Join: the backend's stream waits for everything the side stream was given, then a pending
  // OR's result goes into its word.
  void wait_all() override {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (!pending_) return;
    pending_ = false;
    CUDA_CHECK(cudaEventRecord(join_, side_));
    CUDA_CHECK(cudaStreamWaitEvent(be_.stream(), join_, 0));
    if (or_word_) cuda::launch_fold_flag_bits(flag_bytes_, or_word_, be_.stream());
    or_word_ = nullptr;
  }

  void all_reduce_or(uint32_t* word) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    ncclComm_t comm = live_comm();
    require_joined("all_reduce_or");
    cuda::launch_spread_flag_bits(word, flag_bytes_, be_.stream());
    NCCL_CHECK(comm, ncclAllReduce(flag_bytes_, flag_bytes_, size_t(cuda::kFlagBits), ncclUint8, ncclMax,
                                   comm, be_.stream()));
    cuda::launch_fold_flag_bits(flag_bytes_, word, be_.stream());
  }

  void broadcast(float* x, int64_t n, int root) override {
    if (n <= 0) return;
    std::lock_guard<std::mutex> lock(state_->mu);
    ncclComm_t comm = live_comm();
    require_joined("broadcast");
    NCCL_CHECK(comm, ncclBroadcast(x, x, size_t(n), ncclFloat32, root, comm, be_.stream()));
  }

  void check_alive() const override {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->aborted) throw_aborted();
  }

  std::function<void()> abort_handle() override {
    std::weak_ptr<CommState> weak = state_;
    return [weak] {
      const std::shared_ptr<CommState> st = weak.lock();
      if (!st) return;
      ncclComm_t comm = nullptr;
      {
        // Taken under the mutex, so no enqueue is under way and every later one sees `aborted`.
        std::lock_guard<std::mutex> lock(st->mu);
        comm = st->comm;
        st->comm = nullptr;
        st->aborted = true;
      }
      if (!comm) return;
      // Ends kernels that wait for replicas that will never come (NCCL raises its abort flag
      // first), then frees the communicator once the owning replica, now unwinding, has destroyed
      // the graphs that captured it (its ~NcclCollective does that first). Outside the mutex, so
      // that replica's own calls throw instead of waiting for this.
      ncclCommAbort(comm);
    };
  }

 private:
  // The sum of all_reduce_sum(_async), on `stream`, with the mutex held: in place in f32 (NCCL's
  // pre-multiplying sum reads the weight), or through the staging in the compressed dtype (the
  // weight applied while rounding, then a plain sum, then widened back into x).
  void sum_floats(ncclComm_t comm, float* x, int64_t n, bool weighted, cudaStream_t stream) {
    if (compressed_ == DType::f32) {
      NCCL_CHECK(comm,
                 ncclAllReduce(x, x, size_t(n), ncclFloat32, weighted ? weighted_ : ncclSum, comm, stream));
      return;
    }
    if (n > staging_floats_)
      throw InternalError("a compressed all-reduce of " + std::to_string(n) + " floats, staging for " +
                          std::to_string(staging_floats_));
    cuda::launch_convert_scaled(staging_, compressed_, x, weighted ? weight_ : nullptr, n, stream);
    const ncclDataType_t type = compressed_ == DType::bf16 ? ncclBfloat16 : ncclFloat16;
    NCCL_CHECK(comm, ncclAllReduce(staging_, staging_, size_t(n), type, ncclSum, comm, stream));
    cuda::launch_convert(x, DType::f32, staging_, compressed_, n, false, stream);
  }
  // Called with the mutex held.
  ncclComm_t live_comm() const {
    if (state_->aborted || !state_->comm) throw_aborted();
    return state_->comm;
  }
  // Collectives on the backend's stream while asynchronous sums are pending would race them for
  // the communicator (the device could run them in another order on each replica): a bug.
  void require_joined(const char* call) const {
    if (pending_)
      throw InternalError(std::string("NCCL ") + call + " before wait_all() joined the asynchronous sums");
  }
  void destroy_side_stream() noexcept {  // a destructor's work: nothing to report to
    if (join_) cudaEventDestroy(join_);
    if (fork_) cudaEventDestroy(fork_);
    if (side_) cudaStreamDestroy(side_);
    join_ = fork_ = nullptr;
    side_ = nullptr;
  }
  [[noreturn]] void throw_aborted() const {
    throw WorldStopped("the NCCL communicator of replica " + std::to_string(rank_) + " of " +
                       std::to_string(size_) + " was aborted: another replica failed");
  }

  CudaBackend& be_;
  const int rank_, size_;
  std::shared_ptr<CommState> state_;
  uint8_t* flag_bytes_ = nullptr;  // kFlagBits bytes of device memory
  ncclRedOp_t weighted_ = ncclSum;
  bool has_weighted_ = false;
  const float* weight_ = nullptr;  // set_weight's float (backend memory)
  // compress_sums: the dtype float sums travel in (f32: none) and its staging.
  DType compressed_ = DType::f32;
  void* staging_ = nullptr;
  int64_t staging_floats_ = 0;
  // all_reduce_sum_async: its stream, the event it waits for and the event the join waits for
  // (each recorded and waited on at once, so one of each serves every bucket).
  cudaStream_t side_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
  bool pending_ = false;         // asynchronous sums enqueued since the last wait_all()
  uint32_t* or_word_ = nullptr;  // the word of a pending all_reduce_or_async
};

}  // namespace

std::vector<uint8_t> nccl_unique_id() {
  set_nccl_environment();
  ncclUniqueId uid;
  NCCL_CHECK(nullptr, ncclGetUniqueId(&uid));
  std::vector<uint8_t> id(sizeof uid);
  std::memcpy(id.data(), &uid, sizeof uid);
  return id;
}

std::unique_ptr<DeviceCollective> join_nccl(CudaBackend& be, const std::vector<uint8_t>& id, int rank,
                                            int size) {
  return std::make_unique<NcclCollective>(be, id, rank, size);
}

std::string nccl_library() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "NCCL (version unknown)";
  // 22809 -> 2.28.9 (NCCL_VERSION_CODE: major * 10000 + minor * 100 + patch since 2.9).
  return "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." +
         std::to_string(v % 100);
}

}  // namespace trainer
