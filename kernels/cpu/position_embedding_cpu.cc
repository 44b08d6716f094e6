// position_embedding on the CPU (lib/layers/position_embedding.h): y = x + P broadcast over the
// batch; dP = the batch's sum of dy, each element's samples in order (independent of threads);
// dx = dy.  x, y, dx, dy: (B, n)   P, dP: (n)
#include <cstring>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "lib/layers/position_embedding.h"

namespace trainer {
namespace {

class PositionEmbeddingCpu : public LayerKernel {
 public:
  PositionEmbeddingCpu(const Layer& l, const KernelContext& ctx)
      : B_(ctx.batch), n_(l.input_shape().numel()) {}

  void bind(const KernelBinding& b) override {
    a_ = BoundActivations(b);
    p_ = b.param(0).f32();
    dp_ = b.grad(0).f32();
  }

  void forward(bool) override {
    const float *x = a_.x, *p = p_;
    float* y = a_.y;
    const int64_t n = n_;
#pragma omp parallel for if (B_ * n > 65536)
    for (int64_t b = 0; b < B_; ++b)
      for (int64_t j = 0; j < n; ++j) y[b * n + j] = x[b * n + j] + p[j];
  }

  void backward() override {
    const float* dy = a_.dy;
    float* dp = dp_;
    const int64_t n = n_, B = B_;
#pragma omp parallel for if (B * n > 65536)
    for (int64_t j = 0; j < n; ++j) {
      float s = 0.f;
      for (int64_t b = 0; b < B; ++b) s += dy[b * n + j];
      dp[j] = s;
    }
    if (a_.dx && a_.dx != dy) std::memcpy(a_.dx, dy, size_t(B * n) * sizeof(float));
  }

 private:
  int64_t B_, n_;
  BoundActivations a_;
  float *p_ = nullptr, *dp_ = nullptr;
};

}  // namespace

std::unique_ptr<LayerKernel> make_position_embedding_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<PositionEmbeddingCpu>(l, ctx);
}

}  // namespace trainer
