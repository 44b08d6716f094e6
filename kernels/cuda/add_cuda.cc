// add on the GPU (add.cu): y = x_1 + x_2 + ..., dx_k = dy (copied, or added where the executor
// asks: the input has several consumers).  x_k, y, dx_k, dy: (B, d...)
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
      : be_(cuda_of(ctx)), n_(ctx.batch * l.output_shape().numel()) {}

  bool accumulates_input_grads() const override { return true; }
  void bind(const KernelBinding& b) override { io_ = BoundInputs(b); }

  void forward(bool) override {
    cuda::launch_add(io_.x[0], io_.x[1], io_.y, n_, be_.stream());
    for (size_t k = 2; k < io_.x.size(); ++k) cuda::launch_accumulate(io_.y, io_.x[k], n_, be_.stream());
  }

  void backward() override {
    for (size_t k = 0; k < io_.dx.size(); ++k) {
      if (!io_.dx[k]) continue;
      if (io_.accumulate[k])
        cuda::launch_accumulate(io_.dx[k], io_.dy, n_, be_.stream());
      else
        CUDA_CHECK(cudaMemcpyAsync(io_.dx[k], io_.dy, size_t(n_) * sizeof(float), cudaMemcpyDeviceToDevice,
                                   be_.stream()));
    }
  }

 private:
  CudaBackend& be_;
  int64_t n_;
  BoundInputs io_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_add_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<AddCuda>(l, ctx);
}

}  // namespace trainer
