// Backend: where tensors live and how the non-layer ops of a training step run.
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
#include "lib/core/augment_formula.h"
#include "lib/memory/allocator.h"

namespace trainer {

// The non-finite guard (train.on_nan): what a training step found, as bits of
// StepScalars::nonfinite. A step with a non-finite loss or gradient does not update anything:
// every optimizer op returns without touching weights or state when either bit is set.
// kGradientOverflow is loss scaling's own bit (below): scaled gradients that overflowed skip the
// update too, but they are expected now and then and are not a divergence, so commit_step keeps
// such a step's loss and leaves it out of the NonfiniteRecord.
enum NonfiniteBits : uint32_t {
  kNonfiniteLoss = 1u,
  kNonfiniteGradients = 2u,
  kNonfiniteWeights = 4u,
  kGradientOverflow = 8u,
};
constexpr uint32_t kNonfiniteSkipsUpdate = kNonfiniteLoss | kNonfiniteGradients | kGradientOverflow;
constexpr uint32_t kNonfiniteDiverged = kNonfiniteLoss | kNonfiniteGradients | kNonfiniteWeights;

// Training steps that found a non-finite value since the record was last zeroed. Backend memory,
// written only by Backend::commit_step; the host reads it where it synchronizes anyway (metrics).
struct NonfiniteRecord {
  uint64_t first_step = 0;  // update number (1-based) of the first such step; 0: none
  uint64_t steps = 0;       // how many steps found one (their updates were skipped)
  uint64_t samples = 0;     // the samples of those steps (left out of the loss sum)
  uint32_t first_what = 0;  // NonfiniteBits of the first such step
  uint32_t what = 0;        // NonfiniteBits of all of them, ORed
};

// Dynamic loss scaling (train.loss_scale; the default under math fp16), torch.amp.GradScaler's
// rule (lib/core/loss_scale_formula.h): the loss's gradient is multiplied by `scale` before the
// backward pass, so that small gradients survive fp16, and the parameter gradients by 1/scale
// after it. A step whose unscaled gradients are not finite skips its update and multiplies the
// scale by backoff; growth_interval steps in a row without one multiply it by growth. Backend
// memory, updated on the device inside the step; the host reads it with the metrics.
struct LossScaleState {
  float scale = 65536.f;
  float inv_scale = 1.f / 65536.f;  // 1 / scale, kept beside it so no kernel divides
  uint64_t good_steps = 0;          // steps in a row without overflow since the scale last changed
  uint64_t overflow_steps = 0;      // steps skipped for overflow (since the run began)
};
struct LossScaleHyper {
  float growth = 2.f, backoff = 0.5f;
  int64_t growth_interval = 2000;
  bool dynamic = true;  // false: a fixed scale, never changed
};

// Gradient clipping by the global L2 norm, as torch.nn.utils.clip_grad_norm_: the gradients are
// scaled by min(1, max_norm / (norm + 1e-6)). The backend computes the norm and the factor in its
// own memory, so a clipped step needs no host round trip and stays inside a captured graph.
struct ClipRecord {
  uint64_t clipped_steps = 0;  // steps whose gradients were scaled down (since reset)
  float last_norm = 0.f;       // the global norm of the last step, before clipping
  float last_scale = 1.f;      // the factor applied to the last step's gradients
};
// Partial sums of squares: a fixed count, so the reduction order (and the result) does not
// depend on the device or the thread count.
constexpr int kClipPartials = 512;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;         // registry key: "cpu", "cuda"
  virtual std::string description() const = 0;  // "CPU: oneDNN 2.6.3, 2 threads"
  virtual Allocator& allocator() = 0;
  // The device's peak rate in FLOP/s for dense matrix arithmetic in this backend's math mode (for
  // MFU figures); 0 when unknown.
  virtual double peak_flops() const { return 0; }

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

  // The non-finite guard; everything comes from backend memory, so a captured step replays it.
  // ORs `bit` into s->nonfinite when any of x[0, n) is NaN or infinite.
  virtual void check_finite(const float* x, int64_t n, uint32_t bit, StepScalars* s) = 0;
  // Random crop and horizontal flip of a training batch (lib/core/augment_formula.h), with the
  // step's seed and counter read from s on the device: out = augment(in), in and out distinct.
  //   in, out: (B, C, H, W)
  virtual void augment(const AugmentSpec& spec, const float* in, float* out, int64_t batch,
                       const StepScalars* s) = 0;
  // Ends a training step of `batch` samples: unless s->nonfinite has a kNonfiniteDiverged bit,
  // adds s->batch_loss to *loss_sum; otherwise records the step (update number s->step + 1) in
  // *record.
  virtual void commit_step(const StepScalars* s, int64_t batch, float* loss_sum, NonfiniteRecord* record) = 0;

  // Loss scaling (LossScaleState above). dout: n floats of the loss's gradient, multiplied by
  // st->scale. g: n floats of the gradient arena, multiplied by st->inv_scale; ORs
  // kGradientOverflow into s->nonfinite when any product is NaN or infinite.
  virtual void scale_loss_gradient(float* dout, int64_t n, const LossScaleState* st) = 0;
  virtual void unscale_gradients(float* g, int64_t n, const LossScaleState* st, StepScalars* s) = 0;
  // The end of a step's loss scaling: backs off after an overflow (s->nonfinite &
  // kGradientOverflow), grows after h.growth_interval good steps; a fixed scale only counts.
  virtual void update_loss_scale(const LossScaleHyper& h, LossScaleState* st, const StepScalars* s) = 0;

  // Optimizer updates are not here: each optimizer's step is an OptimizerKernel that the
  // backends register per optimizer (lib/backend/optimizer_kernel.h, lib/optim/optimizer.h).

  // g: n floats (the gradient arena; padding between tensors is zero). partials: kClipPartials
  // doubles of backend memory. Deterministic for a given n.
  virtual void clip_grad_norm(float* g, int64_t n, float max_norm, double* partials, ClipRecord* record) = 0;
  // The same in two phases, for gradients spread over several backends (pipeline stages): the
  // kClipPartials sums of squares of g into partials; then the norm of `groups` * kClipPartials
  // partials (every stage's, gathered by the caller; summed group by group in order), the factor
  // into record and g scaled by it. With one group: clip_grad_norm.
  virtual void clip_grad_sum_squares(const float* g, int64_t n, double* partials) = 0;
  virtual void clip_grad_by_partials(float* g, int64_t n, float max_norm, const double* partials, int groups,
                                     ClipRecord* record) = 0;

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
