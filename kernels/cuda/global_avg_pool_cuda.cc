// global_avg_pool on the GPU (global_avg_pool.cu): the mean over every spatial position of each
// channel, for 1-D, 2-D and 3-D inputs alike (the spatial axes are one contiguous run).
//   x: (B, C, S...), or channels_last (B, S..., C)  y: (B, C)
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/global_avg_pool.cuh"
#include "lib/layers/global_pool.h"

namespace trainer {
namespace {

class GlobalAvgPoolCuda : public LayerKernel {
 public:
  GlobalAvgPoolCuda(const GlobalAvgPool& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)),
        planes_(ctx.batch * l.channels()),
        spatial_(l.spatial()),
        inner_(l.channels_last ? l.channels() : 1) {}

  void bind(const KernelBinding& b) override { a_ = BoundActivations(b); }

  void forward(bool) override {
    const float* x = a_.x;
    float* y = a_.y;
    cuda::launch_global_avg_pool_forward(x, y, planes_, spatial_, inner_, be_.stream());
  }

  void backward() override {
    const float* dy = a_.dy;
    float* dx = a_.dx;
    if (dx) cuda::launch_global_avg_pool_backward(dy, dx, planes_, spatial_, inner_, be_.stream());
  }

 private:
  BoundActivations a_;
  CudaBackend& be_;
  int64_t planes_, spatial_, inner_;  // inner_: channels_last's C (global_avg_pool.cuh), else 1
};

}  // namespace

std::unique_ptr<LayerKernel> make_global_avg_pool_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<GlobalAvgPoolCuda>(static_cast<const GlobalAvgPool&>(l), ctx);
}

}  // namespace trainer
