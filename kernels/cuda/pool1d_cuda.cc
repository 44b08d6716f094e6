// maxpool1d / avgpool1d on the 2-D pooling kernels (pool2d.cu) with H = 1: the layer's resolved
// Window paddings as they are (asymmetric "same" included), max keeps the first maximum of the
// in-bounds window and its backward routes each gradient there, avg divides by the in-bounds
// count (padding excluded), backward gathers without atomics; all as the CPU (oneDNN) computes.
//   x: (B, C, L)  y: (B, C, OL)  workspace (max only): argmax int32 (B, C, OL)
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/pool2d.cuh"
#include "lib/layers/pool1d.h"

namespace trainer {
namespace {

class Pool1dCuda : public LayerKernel {
 public:
  Pool1dCuda(const Pool1d& l, const KernelContext& ctx) : be_(cuda_of(ctx)) {
    g_.batch = ctx.batch;
    g_.channels = l.input_shape()[0];
    g_.h = 1;
    g_.w = l.input_shape()[1];
    g_.oh = 1;
    g_.ow = l.output_shape()[1];
    g_.kh = 1;
    g_.kw = l.size;
    g_.sh = 1;
    g_.sw = l.stride;
    g_.pad_top = 0;
    g_.pad_left = l.w.pad_begin;
    g_.max = l.kind == Pool1d::Kind::max;
  }

  size_t workspace_bytes() const override {
    return g_.max ? size_t(g_.batch * g_.channels * g_.ow) * sizeof(int32_t) : 0;
  }
  void bind(float*, float*, float*, void* ws) override { argmax_ = static_cast<int32_t*>(ws); }

  void forward(const float* x, float* y, bool) override {
    cuda::launch_pool2d_forward(g_, x, y, argmax_, be_.stream());
  }

  void backward(const float*, const float*, const float* dy, float* dx) override {
    if (dx) cuda::launch_pool2d_backward(g_, dy, argmax_, dx, be_.stream());
  }

 private:
  CudaBackend& be_;
  cuda::PoolGeometry g_;
  int32_t* argmax_ = nullptr;
};

}  // namespace

std::unique_ptr<LayerKernel> make_pool1d_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<Pool1dCuda>(static_cast<const Pool1d&>(l), ctx);
}

}  // namespace trainer
