// add on the CPU: y = x_1 + x_2 + ... element-wise (inputs in plain layout), and dx_k = dy. The
// same loop, cpu::accumulate, sums a gradient of a tensor with several consumers (the backend's
// accumulate()). Summation order is fixed (input 1 first), so results do not depend on threads.
//   x_k, y, dx_k, dy: (B, d...)
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_ops.h"
#include "lib/layers/add.h"

namespace trainer {

void cpu::accumulate(float* dst, const float* src, int64_t n) {
#pragma omp parallel for simd if (n > 65536)
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

namespace {

class AddCpu : public LayerKernel {
 public:
  AddCpu(const Layer& l, const KernelContext& ctx) : n_(ctx.batch * l.output_shape().numel()) {}

  bool accumulates_input_grads() const override { return true; }
  // Element-wise: y may be x_0 or x_1 (the first loop reads both before it writes), not a later
  // input (the first loop writes y before the others are read). Backward reads dy only.
  bool may_overwrite_input(size_t k) const override { return k < 2; }
  bool backward_reads_output() const override { return false; }
  void bind(const KernelBinding& b) override { io_ = BoundInputs(b); }

  void forward(bool) override {
    const float *a = io_.x[0], *c = io_.x[1];
    float* y = io_.y;
    const int64_t n = n_;
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] + c[i];
    for (size_t k = 2; k < io_.x.size(); ++k) cpu::accumulate(io_.y, io_.x[k], n_);
  }

  void backward() override {
    for (size_t k = 0; k < io_.dx.size(); ++k) {
      if (!io_.dx[k]) continue;
      if (io_.accumulate[k])
        cpu::accumulate(io_.dx[k], io_.dy, n_);
      else if (io_.dx[k] != io_.dy)  // else the executor gave dx dy's memory (kCopiesOutputGradient)
        std::memcpy(io_.dx[k], io_.dy, size_t(n_) * sizeof(float));
    }
  }

 private:
  int64_t n_;
  BoundInputs io_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_add_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<AddCpu>(l, ctx);
}

}  // namespace trainer
