// concat on the GPU (concat.cu): each input's batch is copied into its slice of every sample of
// y along the channels; backward copies (or adds) the slices of dy back.
//   x_k: (B, C_k, d...)  y, dy: (B, sum C_k, d...)
#include "kernels/cuda/concat.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "lib/layers/concat.h"

namespace trainer {
namespace {

class ConcatCuda : public LayerKernel {
 public:
  ConcatCuda(const Concat& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)), batch_(ctx.batch), out_(l.output_shape().numel()) {
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
    int64_t at = 0;
    for (size_t k = 0; k < x_.size(); ++k) {
      cuda::launch_copy_rows(x_[k], slice_[k], y_ + at, out_, batch_, slice_[k], false, be_.stream());
      at += slice_[k];
    }
  }

  void backward() override {
    int64_t at = 0;
    for (size_t k = 0; k < x_.size(); ++k) {
      if (dx_[k])
        cuda::launch_copy_rows(dy_ + at, out_, dx_[k], slice_[k], batch_, slice_[k], accumulate_[k],
                               be_.stream());
      at += slice_[k];
    }
  }

 private:
  CudaBackend& be_;
  int64_t batch_, out_;
  std::vector<int64_t> slice_;
  std::vector<const float*> x_;
  std::vector<float*> dx_;
  std::vector<bool> accumulate_;
  float *y_ = nullptr, *dy_ = nullptr;
};

}  // namespace

std::unique_ptr<LayerKernel> make_concat_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<ConcatCuda>(static_cast<const Concat&>(l), ctx);
}

}  // namespace trainer
