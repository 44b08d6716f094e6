// layer_norm / rms_norm on the CPU (lib/layers/layer_norm.h), hand loops: oneDNN 2.6's layer
// normalization has no RMS variant, and one loop for both keeps their numerics alike. Rows are
// split over threads; the parameter gradients are summed over rows column block by column block,
// each block's rows in order, so they do not depend on the thread count.
//   x, y, dx, dy: (rows, D)   weight, bias: (D)   workspace: mean and 1/rms-or-std per row
#include <algorithm>
#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "lib/layers/layer_norm.h"

namespace trainer {
namespace {

class LayerNormCpu : public LayerKernel {
 public:
  LayerNormCpu(const LayerNorm& l, const KernelContext& ctx)
      : rms_(l.rms),
        bias_(l.bias),
        eps_(double(l.epsilon)),
        rows_(ctx.batch * l.rows_per_sample()),
        d_(l.features()) {}

  size_t workspace_bytes() const override { return size_t(2 * rows_) * sizeof(float); }
  void bind(const KernelBinding& b) override {
    a_ = BoundActivations(b);
    w_ = b.param(0).f32();
    dw_ = b.grad(0).f32();
    if (bias_) {
      b_ = b.param(1).f32();
      db_ = b.grad(1).f32();
    }
    stats_ = static_cast<float*>(b.workspace);
  }

  void forward(bool) override {
    const float *x = a_.x, *w = w_, *bias = b_;
    float *y = a_.y, *stats = stats_;
    const int64_t d = d_;
    const bool rms = rms_;
    const double eps = eps_;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows_; ++r) {
      const float* xr = x + r * d;
      double mean = 0;
      if (!rms) {
        for (int64_t j = 0; j < d; ++j) mean += xr[j];
        mean /= double(d);
      }
      double sq = 0;
      for (int64_t j = 0; j < d; ++j) sq += (xr[j] - mean) * (xr[j] - mean);
      const float m = float(mean), inv = float(1.0 / std::sqrt(sq / double(d) + eps));
      stats[2 * r] = m;
      stats[2 * r + 1] = inv;
      float* yr = y + r * d;
      for (int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - m) * inv * w[j] + (bias ? bias[j] : 0.f);
    }
  }

  void backward() override {
    const float *x = a_.x, *dy = a_.dy, *w = w_, *stats = stats_;
    float* dx = a_.dx;
    const int64_t d = d_, rows = rows_;
    const bool rms = rms_;
    // First the parameter gradients (nothing is written that dy could share memory with), then dx.
    // dweight = sum over rows of dy * xhat, dbias = sum of dy; columns in blocks, rows in order.
    constexpr int64_t kBlock = 16;
    float *dw = dw_, *db = db_;
#pragma omp parallel for schedule(static)
    for (int64_t j0 = 0; j0 < d; j0 += kBlock) {
      const int64_t j1 = std::min(d, j0 + kBlock);
      double sw[kBlock] = {}, sb[kBlock] = {};
      for (int64_t r = 0; r < rows; ++r) {
        const float *xr = x + r * d, *dyr = dy + r * d;
        const float m = stats[2 * r], inv = stats[2 * r + 1];
        for (int64_t j = j0; j < j1; ++j) {
          sw[j - j0] += double(dyr[j]) * double((xr[j] - m) * inv);
          sb[j - j0] += dyr[j];
        }
      }
      for (int64_t j = j0; j < j1; ++j) {
        dw[j] = float(sw[j - j0]);
        if (db) db[j] = float(sb[j - j0]);
      }
    }
    if (dx) {
      // g = dy * w, xhat = (x - mean) * inv:
      //   layer_norm: dx = inv * (g - mean(g) - xhat * mean(g * xhat))
      //   rms_norm:   dx = inv * (g - xhat * mean(g * xhat))
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < rows; ++r) {
        const float *xr = x + r * d, *dyr = dy + r * d;
        const float m = stats[2 * r], inv = stats[2 * r + 1];
        double sum_g = 0, sum_gx = 0;
        for (int64_t j = 0; j < d; ++j) {
          const double g = double(dyr[j]) * w[j];
          sum_g += g;
          sum_gx += g * double((xr[j] - m) * inv);
        }
        const float mean_g = rms ? 0.f : float(sum_g / double(d)), mean_gx = float(sum_gx / double(d));
        float* dxr = dx + r * d;
        for (int64_t j = 0; j < d; ++j) {
          const float xhat = (xr[j] - m) * inv;
          dxr[j] = inv * (dyr[j] * w[j] - mean_g - xhat * mean_gx);
        }
      }
    }
  }

 private:
  bool rms_, bias_;
  double eps_;
  int64_t rows_, d_;
  BoundActivations a_;
  float *w_ = nullptr, *dw_ = nullptr, *b_ = nullptr, *db_ = nullptr, *stats_ = nullptr;
};

}  // namespace

std::unique_ptr<LayerKernel> make_layer_norm_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<LayerNormCpu>(static_cast<const LayerNorm&>(l), ctx);
}

}  // namespace trainer
