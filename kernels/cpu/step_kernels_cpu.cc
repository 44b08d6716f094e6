// The training step's own kernels on the CPU (lib/backend/step_kernels.h): the hand loops of
// nonfinite_guard.cc, loss_scale.cc, clip_grad_norm.cc and augment_cpu.cc, which are the
// reference for the GPU's.
#include <memory>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_ops.h"

namespace trainer {
namespace {

class GuardCpu : public GuardKernel {
 public:
  void check(const float* x, int64_t n, uint32_t bit, StepScalars* s) override {
    cpu::check_finite(x, n, bit, *s);
  }
  void commit(const StepScalars* s, int64_t batch, float* loss_sum, NonfiniteRecord* record) override {
    cpu::commit_step(*s, batch, loss_sum, *record);
  }
};

class LossScaleCpu : public LossScaleKernel {
 public:
  explicit LossScaleCpu(const LossScaleHyper& h) : h_(h) {}
  void scale(float* dout, int64_t n, const LossScaleState* st) override {
    cpu::scale_loss_gradient(dout, n, *st);
  }
  void unscale(float* g, int64_t n, const LossScaleState* st, StepScalars* s) override {
    cpu::unscale_gradients(g, n, *st, *s);
  }
  void update(LossScaleState* st, const StepScalars* s) override { cpu::update_loss_scale(h_, *st, *s); }

 private:
  LossScaleHyper h_;
};

class ClipCpu : public ClipKernel {
 public:
  explicit ClipCpu(float max_norm) : max_norm_(max_norm) {}
  void sum_squares(const float* g, int64_t n, double* partials) override {
    cpu::clip_grad_sum_squares(g, n, partials);
  }
  void by_partials(float* g, int64_t n, const double* partials, int groups, ClipRecord* record) override {
    cpu::clip_grad_by_partials(g, n, max_norm_, partials, groups, record);
  }

 private:
  float max_norm_;
};

class AugmentCpu : public AugmentKernel {
 public:
  explicit AugmentCpu(const AugmentSpec& spec) : spec_(spec) {}
  void run(const float* in, float* out, int64_t batch, const StepScalars* s) override {
    cpu::augment(spec_, in, out, batch, *s);
  }

 private:
  AugmentSpec spec_;
};

}  // namespace

StepKernelSet cpu_step_kernels() {
  StepKernelSet set;
  set.guard = [](Backend&) { return std::make_unique<GuardCpu>(); };
  set.loss_scale = [](Backend&, const LossScaleHyper& h) { return std::make_unique<LossScaleCpu>(h); };
  set.clip = [](Backend&, float max_norm) { return std::make_unique<ClipCpu>(max_norm); };
  set.augment = [](Backend&, const AugmentSpec& spec) { return std::make_unique<AugmentCpu>(spec); };
  return set;
}

}  // namespace trainer
