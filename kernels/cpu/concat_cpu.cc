// concat on the CPU: each sample's output is its inputs' slices one after another along the
// channels (plain layout); backward copies the slices of dy back (or adds them, when the
// executor asks: the input has several consumers).
//   x_k: (B, C_k, d...)  y, dy: (B, sum C_k, d...)
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/cpu_ops.h"
#include "lib/layers/concat.h"

namespace trainer {
namespace {

class ConcatCpu : public LayerKernel {
 public:
  ConcatCpu(const Concat& l, const KernelContext& ctx) : batch_(ctx.batch), out_(l.output_shape().numel()) {
    for (const Shape& s : l.input_shapes()) slice_.push_back(s.numel());
  }

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
#pragma omp parallel for schedule(static) if (batch_ * out_ > 65536)
    for (int64_t b = 0; b < batch_; ++b) {
      int64_t at = 0;
      for (size_t k = 0; k < x_.size(); ++k) {
        std::memcpy(y_ + b * out_ + at, x_[k] + b * slice_[k], size_t(slice_[k]) * sizeof(float));
        at += slice_[k];
      }
    }
  }

  void backward() override {
#pragma omp parallel for schedule(static) if (batch_ * out_ > 65536)
    for (int64_t b = 0; b < batch_; ++b) {
      int64_t at = 0;
      for (size_t k = 0; k < x_.size(); ++k) {
        if (dx_[k]) {
          const float* src = dy_ + b * out_ + at;
          float* dst = dx_[k] + b * slice_[k];
          if (accumulate_[k])
            for (int64_t i = 0; i < slice_[k]; ++i) dst[i] += src[i];
          else
            std::memcpy(dst, src, size_t(slice_[k]) * sizeof(float));
        }
        at += slice_[k];
      }
    }
  }

 private:
  int64_t batch_, out_;
  std::vector<int64_t> slice_;  // elements per sample of each input
  std::vector<const float*> x_;
  std::vector<float*> dx_;
  std::vector<bool> accumulate_;
  float *y_ = nullptr, *dy_ = nullptr;
};

}  // namespace

std::unique_ptr<LayerKernel> make_concat_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<ConcatCpu>(static_cast<const Concat&>(l), ctx);
}

}  // namespace trainer
