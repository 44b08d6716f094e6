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
  void bind(const KernelBinding& b) override {
    x_.clear();
    dx_.clear();
    accumulate_.clear();
    for (size_t k = 0; k < b.inputs.size(); ++k) {
      x_.push_back(b.input(k).f32());
      dx_.push_back(b.input_grad(k).f32());
      accumulate_.push_back(k < b.accumulate_input_grads.size() && b.accumulate_input_grads[k]);
    }
    y_ = b.output.f32();
    dy_ = b.output_grad.f32();
  }

  void forward(bool) override {
    const float *a = x_[0], *c = x_[1];
    float* y = y_;
    const int64_t n = n_;
#pragma omp parallel for simd if (n > 65536)
    for (int64_t i = 0; i < n; ++i) y[i] = a[i] + c[i];
    for (size_t k = 2; k < x_.size(); ++k) cpu::accumulate(y_, x_[k], n_);
  }

  void backward() override {
    for (size_t k = 0; k < dx_.size(); ++k) {
      if (!dx_[k]) continue;
      if (accumulate_[k])
        cpu::accumulate(dx_[k], dy_, n_);
      else
        std::memcpy(dx_[k], dy_, size_t(n_) * sizeof(float));
    }
  }

 private:
  int64_t n_;
  std::vector<const float*> x_;
  std::vector<float*> dx_;
  std::vector<bool> accumulate_;
  float *y_ = nullptr, *dy_ = nullptr;
};

}  // namespace

std::unique_ptr<LayerKernel> make_add_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<AddCpu>(l, ctx);
}

}  // namespace trainer
