// The training step's own kernels, besides the layers', the loss's and the optimizer's: the
// non-finite guard, loss scaling, gradient clipping and augmentation. Each backend registers one
// StepKernelSet (kernels/cpu/register_cpu_kernels.cc, kernels/cuda/register_cuda_kernels.cc); the
// executor makes the kernels it needs once, when it plans, with their settings. Everything they
// read and write is backend memory (the step's scalars, the records below), so a captured step
// (CUDA graph) replays them and the host never waits for them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "lib/backend/layer_kernel.h"
#include "lib/core/augment_formula.h"
#include "lib/core/error.h"

namespace trainer {

class Backend;

// The non-finite guard (train.on_nan): what a training step found, as bits of
// StepScalars::nonfinite. A step with a non-finite loss or gradient does not update anything:
// every optimizer op returns without touching weights or state when either bit is set.
// kGradientOverflow is loss scaling's own bit (below): scaled gradients that overflowed skip the
// update too, but they are expected now and then and are not a divergence, so GuardKernel::commit keeps
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
// written only by GuardKernel::commit; the host reads it where it synchronizes anyway (metrics).
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

// ORs a NonfiniteBits bit into the step's scalars when a tensor is not finite, and ends a
// training step.
class GuardKernel {
 public:
  virtual ~GuardKernel() = default;
  // ORs `bit` into s->nonfinite when any of x[0, n) is NaN or infinite.
  virtual void check(const float* x, int64_t n, uint32_t bit, StepScalars* s) = 0;
  // Ends a training step of `batch` samples: unless s->nonfinite has a kNonfiniteDiverged bit,
  // adds s->batch_loss to *loss_sum; otherwise records the step (update number s->step + 1) in
  // *record.
  virtual void commit(const StepScalars* s, int64_t batch, float* loss_sum, NonfiniteRecord* record) = 0;
};

// Loss scaling (LossScaleState above), made with the run's LossScaleHyper.
class LossScaleKernel {
 public:
  virtual ~LossScaleKernel() = default;
  // dout: n floats of the loss's gradient, multiplied by st->scale.
  virtual void scale(float* dout, int64_t n, const LossScaleState* st) = 0;
  // g: n floats of the gradient arena, multiplied by st->inv_scale; ORs kGradientOverflow into
  // s->nonfinite when any product is NaN or infinite.
  virtual void unscale(float* g, int64_t n, const LossScaleState* st, StepScalars* s) = 0;
  // The end of a step's loss scaling: backs off after an overflow (s->nonfinite &
  // kGradientOverflow), grows after growth_interval good steps; a fixed scale only counts.
  virtual void update(LossScaleState* st, const StepScalars* s) = 0;
};

// Clipping by the global norm (ClipRecord above), made with max_norm > 0. g: n floats (the
// gradient arena; padding between tensors is zero); partials: kClipPartials doubles of backend
// memory a group. Deterministic for a given n.
class ClipKernel {
 public:
  virtual ~ClipKernel() = default;
  // The kClipPartials sums of squares of g into partials.
  virtual void sum_squares(const float* g, int64_t n, double* partials) = 0;
  // The norm of `groups` * kClipPartials partials (every pipeline stage's, gathered by the caller;
  // summed group by group in order), the factor into record and g scaled by it.
  virtual void by_partials(float* g, int64_t n, const double* partials, int groups, ClipRecord* record) = 0;
  // One backend's gradients: both phases with one group, bit for bit.
  virtual void clip(float* g, int64_t n, double* partials, ClipRecord* record) {
    sum_squares(g, n, partials);
    by_partials(g, n, partials, 1, record);
  }
  // The norm and the factor into record, g left as it is: for an optimizer step that multiplies
  // the gradients by the factor as it reads them (OptimizerKernel::fuse_grad_scale). And, as
  // GuardKernel::check would, `bit` ORed into s->nonfinite when a gradient is not finite: the norm
  // is then not finite (the squares of finite floats summed in f64 do not overflow), so the
  // gradients need no pass of their own. Only backends whose optimizer steps take the scaling
  // over implement it.
  virtual void norm_only(const float* g, int64_t n, double* partials, ClipRecord* record, StepScalars* s,
                         uint32_t bit) {
    (void)g;
    (void)n;
    (void)partials;
    (void)record;
    (void)s;
    (void)bit;
    throw InternalError("this backend's clipping always scales the gradients");
  }
};

// Random crop and horizontal flip of a training batch (lib/core/augment_formula.h), made with the
// AugmentSpec; the step's seed and counter are read from s on the device.
class AugmentKernel {
 public:
  virtual ~AugmentKernel() = default;
  //   in, out: (batch, C, H, W), distinct
  virtual void run(const float* in, float* out, int64_t batch, const StepScalars* s) = 0;
};

// One backend's factories, all four required.
struct StepKernelSet {
  std::function<std::unique_ptr<GuardKernel>(Backend&)> guard;
  std::function<std::unique_ptr<LossScaleKernel>(Backend&, const LossScaleHyper&)> loss_scale;
  std::function<std::unique_ptr<ClipKernel>(Backend&, float max_norm)> clip;
  std::function<std::unique_ptr<AugmentKernel>(Backend&, const AugmentSpec&)> augment;
};

class StepKernelRegistry {
 public:
  static StepKernelRegistry& global();
  // Replaces an earlier set of the same backend. Throws InternalError when a factory is missing.
  void add(const std::string& backend, StepKernelSet set);
  bool has(const std::string& backend) const { return sets_.count(backend) != 0; }

  // The kernels of be's backend (Backend::name()). Throw InternalError when it registered none.
  std::unique_ptr<GuardKernel> guard(Backend& be) const;
  std::unique_ptr<LossScaleKernel> loss_scale(Backend& be, const LossScaleHyper& h) const;
  std::unique_ptr<ClipKernel> clip(Backend& be, float max_norm) const;
  std::unique_ptr<AugmentKernel> augment(Backend& be, const AugmentSpec& spec) const;

 private:
  const StepKernelSet& of(const Backend& be) const;
  std::map<std::string, StepKernelSet> sets_;
};

}  // namespace trainer
