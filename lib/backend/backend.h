// Backend: what a device is: where tensors live, its stream, copies, conversions, graphs and
// collectives.
//
// The CPU (oneDNN) and CUDA (cuDNN/cuBLAS) backends implement this; layers reach their kernels
// through the registry (lib/backend/layer_kernel.h). All ops are asynchronous on the backend's one
// stream; only copy_to_host() and synchronize() wait. Nothing here allocates: callers pass memory
// carved from arenas that were sized before the first step.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/backend/device_collective.h"
#include "lib/backend/layer_kernel.h"
#include "lib/memory/allocator.h"

namespace trainer {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;         // registry key: "cpu", "cuda"
  virtual std::string description() const = 0;  // "CPU: oneDNN 2.6.3, 2 threads"
  virtual Allocator& allocator() = 0;
  // The device's peak rate in FLOP/s for dense matrix arithmetic in this backend's math mode (for
  // MFU figures); 0 when unknown.
  virtual double peak_flops() const { return 0; }
  // The threads a step computes with on the host's cores (the CPU backend's OpenMP team); 0 for a
  // device that computes elsewhere.
  virtual int host_threads() const { return 0; }

  // dst/src are backend memory on the device side. The host source may be reused as soon as
  // copy_to_device returns; copy_to_host waits for all queued work and the copy.
  virtual void copy_to_device(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  // A step's host inputs (the batch, its labels, the step's scalars): each piece's bytes from host
  // src to device dst, queued before the work enqueued after this call, and src reusable when it
  // returns, as copy_to_device. landing: device memory of landing_bytes() for these pieces, or
  // null. A backend with a landing zone may copy into it while the work queued before still runs
  // (the GPU: a copy engine beside the previous step), then move the pieces to their places in
  // stream order; the default copies each piece with copy_to_device.
  struct UploadPiece {
    void* dst = nullptr;
    const void* src = nullptr;
    size_t bytes = 0;
  };
  virtual bool stages_uploads() const { return false; }  // whether upload_inputs uses a landing zone
  // Makes room, before the first step, for upload_inputs of up to `bytes` to go without waiting
  // on the host for the upload before (a backend that stages uploads through host memory).
  virtual void reserve_uploads(size_t bytes) {}
  // The landing zone's packing: each piece from a 16-byte boundary; its bytes, and with `offsets`
  // (n of them) where each piece starts.
  static size_t landing_bytes(const UploadPiece* pieces, int n, size_t* offsets = nullptr);
  virtual void upload_inputs(const UploadPiece* pieces, int n, void* landing);
  virtual void zero(void* dst, size_t bytes) = 0;
  // dst[i] = src[i] (or dst[i] += src[i] with accumulate), i < n, converting between dtypes (round
  // to nearest even; the sum is formed in f32): the executor's conversions between a kernel that
  // keeps f32 and its low-precision neighbours, and the sum of the gradients of a tensor that
  // several layers consume. dst and src do not overlap.
  virtual void convert(void* dst, DType dst_type, const void* src, DType src_type, int64_t n,
                       bool accumulate) = 0;
  virtual void synchronize() = 0;
  // dst (dtype t, (K, R, S, C)) = the f32 filter src (K, C, R, S) rounded to t: the 16-bit copy of
  // a LowFilterLayout. Only backends whose kernels ask for one (LayerKernel::low_param_krsc).
  virtual void convert_filter_krsc(void* dst, DType t, const float* src, const LowFilterLayout& f);

  // The training step's own ops (the non-finite guard, loss scaling, gradient clipping,
  // augmentation), the loss and the optimizer's update are not here: they are kernels that each
  // backend registers and the executor makes once when it plans (lib/backend/step_kernels.h,
  // loss_kernel.h, optimizer_kernel.h).

  // Step capture (CUDA graphs): work enqueued between begin_capture() and end_capture() is
  // recorded rather than run; replay() enqueues the whole recording again with one launch.
  // Recorded work must take every per-step value from backend memory (StepScalars), never
  // from host arguments. Backends without capture keep the defaults.
  // Whether backend memory is host memory that the host may read and write directly once
  // synchronize() returned (the CPU backend): what MPI's host collectives need.
  virtual bool host_memory() const { return false; }
  // Whether this backend (on this machine) computes in math mode `m`; strict fp32 always.
  virtual bool supports_math(MathMode m) const { return m == MathMode::strict_fp32; }
  // The dtype of the tensors between layers (and of their gradients) in math mode m, for the
  // layer types whose kernels take low precision (Registry: kLowPrecisionActivations); f32 keeps
  // every activation f32.
  virtual DType activation_dtype(MathMode m) const { return DType::f32; }
  virtual bool supports_capture() const { return false; }
  virtual void begin_capture() {}
  // Returns a handle for replay(). Throws if the capture failed.
  virtual int end_capture() { return -1; }
  // Ends a capture abandoned after an error, discarding it.
  virtual void abort_capture() noexcept {}
  virtual void replay(int graph) {}

  // Device collectives (lib/backend/device_collective.h): data parallelism with the gradients
  // all-reduced in backend memory, on the device (NCCL on the CUDA backend). The CPU backend has
  // none: its ranks all-reduce host memory through the host Communicator.
  // "" when this backend can join one; otherwise why not, for the user.
  virtual std::string collectives_unavailable() const {
    return "the " + name() + " backend has no device collectives";
  }
  // The name of the library ("NCCL 2.28.9"); "" without one.
  virtual std::string collective_library() const { return ""; }
  // The unique id that the replicas of one collective join with (replica 0 makes it, the host
  // Communicator hands it to the others). Throws UsageError where collectives_unavailable().
  virtual std::vector<uint8_t> make_collective_id();
  // Joins the collective `id` as replica `rank` of `size`, on this backend's device and stream;
  // blocks until every replica has joined. Throws UsageError where collectives_unavailable(),
  // RuntimeError when the library fails.
  virtual std::unique_ptr<DeviceCollective> join_collective(const std::vector<uint8_t>& id, int rank,
                                                            int size);

  // Model parallelism (lib/model/pipeline.h): one thread drives the backends of several stages,
  // and the tensor at a stage boundary goes from one backend's memory to the next's.
  // Makes this backend's device the calling thread's current one (CUDA: cudaSetDevice); called
  // before work is enqueued here.
  virtual void make_current() {}
  // Work enqueued here from now on starts after all the work enqueued on `other` so far (CUDA: an
  // event recorded on other's stream, waited for by this one: the host does not wait). The
  // default serves backends whose work is done when enqueued (the CPU): other.synchronize().
  virtual void wait_for(Backend& other);
  // Copies `bytes` from `src`, memory of backend `from`, to `dst`, this backend's memory, on this
  // backend's stream (call wait_for(from) first). CUDA: a peer copy between GPUs. The default
  // copies host memory (both backends host_memory()); other pairs throw UsageError.
  virtual void copy_from(Backend& from, void* dst, const void* src, size_t bytes);

  // Named ranges for profilers (NVTX on the GPU, so `nsys` shows the steps and `ncu --nvtx
  // --nvtx-include "train_step/"` profiles only a step's kernels); nothing elsewhere. Host-side
  // only: no sync, nothing enqueued.
  virtual void range_push(const char* name) {}
  virtual void range_pop() {}
};

// Pushes a profiler range for the lifetime of the object.
class ProfileRange {
 public:
  ProfileRange(Backend& be, const char* name) : be_(be) { be_.range_push(name); }
  ~ProfileRange() { be_.range_pop(); }
  ProfileRange(const ProfileRange&) = delete;
  ProfileRange& operator=(const ProfileRange&) = delete;

 private:
  Backend& be_;
};

}  // namespace trainer
