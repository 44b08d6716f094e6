// embedding on the CPU: a gather forward and a scatter-add backward (oneDNN has no such
// primitive). The output is channels-first (see lib/layers/embedding.h).
//   x: (B, L) float token ids   W: (V, D)   y: (B, D, L), or (B, L, D) without channels_first
//   forward:  y[b, d, l] = W[id(b, l), d]
//   backward: dW = 0; dW[id(b, l), d] += dy[b, d, l]   (no gradient for the ids: dx = 0)
// Out-of-range ids are clamped to [0, V-1] (the data pipeline should not produce them; a kernel
// cannot stop mid-step), with one warning per kernel naming the layer and the first bad id.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "lib/core/embedding_formula.h"
#include "lib/layers/embedding.h"

namespace trainer {
namespace {

class EmbeddingCpu : public LayerKernel {
 public:
  EmbeddingCpu(const Embedding& l, const KernelContext& ctx)
      : name_(l.name()),
        B_(ctx.batch),
        L_(l.length()),
        V_(l.input_dim),
        D_(l.output_dim),
        dstride_(l.channels_first ? L_ : 1),
        lstride_(l.channels_first ? 1 : D_) {}

  void bind(const KernelBinding& b) override {
    a_ = BoundActivations(b);
    w_ = b.param(0).f32();
    dw_ = b.grad(0).f32();
    accumulate_ = b.accumulate_param_grads;
  }

  bool accumulates_param_grads() const override { return true; }

  void forward(bool) override {
    const float* x = a_.x;
    float* y = a_.y;
    int64_t bad = 0;
#pragma omp parallel for if (B_ * L_ * D_ > 65536) reduction(+ : bad)
    for (int64_t b = 0; b < B_; ++b) {
      for (int64_t l = 0; l < L_; ++l) {
        const float v = x[b * L_ + l];
        const int64_t id = token(v);
        bad += float(id) != v;
        const float* row = w_ + id * D_;
        float* out = y + b * D_ * L_ + l * lstride_;
        for (int64_t d = 0; d < D_; ++d) out[d * dstride_] = row[d];
      }
    }
    if (bad && !warned_.exchange(true)) {
      float first = 0.f;
      for (int64_t i = 0; i < B_ * L_; ++i)
        if (float(token(x[i])) != x[i]) {
          first = x[i];
          break;
        }
      spdlog::warn(
          "embedding '{}': {} token id(s) in this batch are not integers in [0, {}) (first: {}) "
          "and were clamped; input_dim must exceed the largest id in the data",
          name_, bad, V_, first);
    }
  }

  void backward() override {
    const float *x = a_.x, *dy = a_.dy;
    float* dx = a_.dx;
    if (!accumulate_) std::memset(dw_, 0, size_t(V_ * D_) * sizeof(float));  // else a tied layer wrote it
      // Each thread owns whole columns d, so the sums are race-free and in a fixed order.
#pragma omp parallel for if (B_ * L_ * D_ > 65536)
    for (int64_t d = 0; d < D_; ++d)
      for (int64_t b = 0; b < B_; ++b) {
        const float* g = dy + b * D_ * L_ + d * dstride_;
        for (int64_t l = 0; l < L_; ++l) dw_[token(x[b * L_ + l]) * D_ + d] += g[l * lstride_];
      }
    if (dx) std::memset(dx, 0, size_t(B_ * L_) * sizeof(float));
  }

 private:
  // The row of an id (lib/core/embedding_formula.h): exact for integral floats in range, clamped
  // otherwise (NaN -> 0).
  int64_t token(float v) const { return embedding_row(v, last_f_, V_ - 1); }

  std::string name_;
  int64_t B_, L_, V_, D_;
  int64_t dstride_, lstride_;  // y's strides of d and l within a sample
  float last_f_ = float(V_ - 1);
  BoundActivations a_;
  float* w_ = nullptr;
  float* dw_ = nullptr;
  bool accumulate_ = false;
  std::atomic<bool> warned_{false};
};

}  // namespace

std::unique_ptr<LayerKernel> make_embedding_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<EmbeddingCpu>(static_cast<const Embedding&>(l), ctx);
}

}  // namespace trainer
