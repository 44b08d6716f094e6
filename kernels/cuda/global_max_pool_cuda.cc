// global_max_pool on the GPU (global_max_pool.cu): the maximum over every spatial position of each
// channel; the position of each maximum is kept in the workspace for backward.
//   x: (B, C, S...), or channels_last (B, S..., C)  y: (B, C)  workspace: argmax (B * C) int32
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/global_max_pool.cuh"
#include "lib/layers/global_pool.h"

namespace trainer {
namespace {

class GlobalMaxPoolCuda : public LayerKernel {
 public:
  GlobalMaxPoolCuda(const GlobalMaxPool& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)),
        planes_(ctx.batch * l.channels()),
        spatial_(l.spatial()),
        inner_(l.channels_last ? l.channels() : 1) {}

  size_t workspace_bytes() const override { return size_t(planes_) * sizeof(int32_t); }
  void bind(const KernelBinding& b) override {
    a_ = BoundActivations(b);
    argmax_ = static_cast<int32_t*>(b.workspace);
  }

  void forward(bool) override {
    cuda::launch_global_max_pool_forward(a_.x, a_.y, argmax_, planes_, spatial_, inner_, be_.stream());
  }

  void backward() override {
    if (a_.dx)
      cuda::launch_global_max_pool_backward(a_.dy, argmax_, a_.dx, planes_, spatial_, inner_, be_.stream());
  }

 private:
  CudaBackend& be_;
  int64_t planes_, spatial_, inner_;  // inner_: channels_last's C (global_avg_pool.cuh), else 1
  BoundActivations a_;
  int32_t* argmax_ = nullptr;
};

}  // namespace

std::unique_ptr<LayerKernel> make_global_max_pool_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<GlobalMaxPoolCuda>(static_cast<const GlobalMaxPool&>(l), ctx);
}

}  // namespace trainer
