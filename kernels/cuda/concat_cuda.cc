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
  void bind(const KernelBinding& b) override { io_ = BoundInputs(b); }

  void forward(bool) override {
    int64_t at = 0;
    for (size_t k = 0; k < io_.x.size(); ++k) {
      cuda::launch_copy_rows(io_.x[k], slice_[k], io_.y + at, out_, batch_, slice_[k], false, be_.stream());
      at += slice_[k];
    }
  }

  void backward() override {
    int64_t at = 0;
    for (size_t k = 0; k < io_.x.size(); ++k) {
      if (io_.dx[k])
        cuda::launch_copy_rows(io_.dy + at, out_, io_.dx[k], slice_[k], batch_, slice_[k], io_.accumulate[k],
                               be_.stream());
      at += slice_[k];
    }
  }

 private:
  CudaBackend& be_;
  int64_t batch_, out_;
  std::vector<int64_t> slice_;
  BoundInputs io_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_concat_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<ConcatCuda>(static_cast<const Concat&>(l), ctx);
}

}  // namespace trainer
