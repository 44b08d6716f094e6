// The training step's own kernels on the GPU (lib/backend/step_kernels.h), on the backend's
// stream: nonfinite_guard.cu, loss_scale.cu, clip_grad_norm.cu and augment.cu. Each reads and
// writes device memory only, so a captured step replays it.
#include <memory>

#include "kernels/cuda/augment.cuh"
#include "kernels/cuda/clip_grad_norm.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/loss_scale.cuh"
#include "kernels/cuda/nonfinite_guard.cuh"
#include "lib/core/error.h"

namespace trainer {
namespace {

cudaStream_t stream_of(Backend& be) {
  auto* cuda = dynamic_cast<CudaBackend*>(&be);
  if (!cuda) throw InternalError("a CUDA step kernel was made for the " + be.name() + " backend");
  return cuda->stream();
}

class GuardCuda : public GuardKernel {
 public:
  explicit GuardCuda(Backend& be) : stream_(stream_of(be)) {}
  void check(const float* x, int64_t n, uint32_t bit, StepScalars* s) override {
    cuda::launch_check_finite(x, n, bit, s, stream_);
  }
  void commit(const StepScalars* s, int64_t batch, float* loss_sum, NonfiniteRecord* record) override {
    cuda::launch_commit_step(s, batch, loss_sum, record, stream_);
  }

 private:
  cudaStream_t stream_;
};

class LossScaleCuda : public LossScaleKernel {
 public:
  LossScaleCuda(Backend& be, const LossScaleHyper& h) : stream_(stream_of(be)), h_(h) {}
  void scale(float* dout, int64_t n, const LossScaleState* st) override {
    cuda::launch_scale_loss_gradient(dout, n, st, stream_);
  }
  void unscale(float* g, int64_t n, const LossScaleState* st, StepScalars* s) override {
    cuda::launch_unscale_gradients(g, n, st, s, stream_);
  }
  void update(LossScaleState* st, const StepScalars* s) override {
    cuda::launch_update_loss_scale(h_, st, s, stream_);
  }

 private:
  cudaStream_t stream_;
  LossScaleHyper h_;
};

class ClipCuda : public ClipKernel {
 public:
  ClipCuda(Backend& be, float max_norm) : stream_(stream_of(be)), max_norm_(max_norm) {}
  void sum_squares(const float* g, int64_t n, double* partials) override {
    cuda::launch_clip_sum_squares(g, n, partials, stream_);
  }
  void by_partials(float* g, int64_t n, const double* partials, int groups, ClipRecord* record) override {
    cuda::launch_clip_by_partials(g, n, max_norm_, partials, groups, record, stream_);
  }
  void clip(float* g, int64_t n, double* partials, ClipRecord* record) override {
    cuda::launch_clip_grad_norm(g, n, max_norm_, partials, record, stream_);
  }
  void norm_only(const float* g, int64_t n, double* partials, ClipRecord* record, StepScalars* s,
                 uint32_t bit) override {
    cuda::launch_clip_norm_only(g, n, max_norm_, partials, record, s, bit, stream_);
  }

 private:
  cudaStream_t stream_;
  float max_norm_;
};

class AugmentCuda : public AugmentKernel {
 public:
  AugmentCuda(Backend& be, const AugmentSpec& spec) : stream_(stream_of(be)), spec_(spec) {}
  void run(const float* in, float* out, int64_t batch, const StepScalars* s) override {
    cuda::launch_augment(spec_, in, out, batch, s, stream_);
  }

 private:
  cudaStream_t stream_;
  AugmentSpec spec_;
};

}  // namespace

StepKernelSet cuda_step_kernels() {
  StepKernelSet set;
  set.guard = [](Backend& be) { return std::make_unique<GuardCuda>(be); };
  set.loss_scale = [](Backend& be, const LossScaleHyper& h) {
    return std::make_unique<LossScaleCuda>(be, h);
  };
  set.clip = [](Backend& be, float max_norm) { return std::make_unique<ClipCuda>(be, max_norm); };
  set.augment = [](Backend& be, const AugmentSpec& spec) { return std::make_unique<AugmentCuda>(be, spec); };
  return set;
}

}  // namespace trainer
