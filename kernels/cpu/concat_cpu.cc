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
  void bind(const KernelBinding& b) override { io_ = BoundInputs(b); }

  void forward(bool) override {
#pragma omp parallel for schedule(static) if (batch_ * out_ > 65536)
    for (int64_t b = 0; b < batch_; ++b) {
      int64_t at = 0;
      for (size_t k = 0; k < io_.x.size(); ++k) {
        std::memcpy(io_.y + b * out_ + at, io_.x[k] + b * slice_[k], size_t(slice_[k]) * sizeof(float));
        at += slice_[k];
      }
    }
  }

  void backward() override {
#pragma omp parallel for schedule(static) if (batch_ * out_ > 65536)
    for (int64_t b = 0; b < batch_; ++b) {
      int64_t at = 0;
      for (size_t k = 0; k < io_.x.size(); ++k) {
        if (io_.dx[k]) {
          const float* src = io_.dy + b * out_ + at;
          float* dst = io_.dx[k] + b * slice_[k];
          if (io_.accumulate[k])
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
  BoundInputs io_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_concat_cpu(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<ConcatCpu>(static_cast<const Concat&>(l), ctx);
}

}  // namespace trainer
