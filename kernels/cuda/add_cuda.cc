// add on the GPU (add.cu): y = x_1 + x_2 + ..., dx_k = dy (copied, or added where the executor
// asks: the input has several consumers). Any activation dtype (KernelContext::act_dtype).
//   x_k, y, dx_k, dy: (B, d...)
#include "kernels/cuda/add.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "lib/layers/add.h"

namespace trainer {
namespace {

class AddCuda : public LayerKernel {
 public:
  AddCuda(const Layer& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)), dtype_(ctx.act_dtype), n_(ctx.batch * l.output_shape().numel()) {}

  bool accumulates_input_grads() const override { return true; }
  void bind(const KernelBinding& b) override {
    x_.clear();
    dx_.clear();
    accumulate_.clear();
    for (size_t k = 0; k < b.inputs.size(); ++k) {
      x_.push_back(b.input(k).as(dtype_));
      dx_.push_back(b.input_grad(k).as(dtype_));
      accumulate_.push_back(k < b.accumulate_input_grads.size() && b.accumulate_input_grads[k]);
    }
    y_ = b.output.as(dtype_);
    dy_ = b.output_grad.as(dtype_);
  }

  void forward(bool) override {
    cuda::launch_add(dtype_, x_[0], x_[1], y_, n_, be_.stream());
    for (size_t k = 2; k < x_.size(); ++k) cuda::launch_add(dtype_, y_, x_[k], y_, n_, be_.stream());
  }

  void backward() override {
    for (size_t k = 0; k < dx_.size(); ++k) {
      if (!dx_[k]) continue;
      if (accumulate_[k])
        cuda::launch_add(dtype_, dx_[k], dy_, dx_[k], n_, be_.stream());
      else
        CUDA_CHECK(cudaMemcpyAsync(dx_[k], dy_, size_t(n_) * dtype_bytes(dtype_), cudaMemcpyDeviceToDevice,
                                   be_.stream()));
    }
  }

 private:
  CudaBackend& be_;
  DType dtype_;
  int64_t n_;
  std::vector<const void*> x_;
  std::vector<void*> dx_;
  std::vector<bool> accumulate_;
  void* y_ = nullptr;
  const void* dy_ = nullptr;
};

}  // namespace

std::unique_ptr<LayerKernel> make_add_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<AddCuda>(l, ctx);
}

}  // namespace trainer
