// maxpool2d / avgpool2d on own kernels (pool2d.cu): they take the layer's resolved Window
// paddings as they are, asymmetric "same" included, which cuDNN's pooling descriptor cannot, and
// the max backward routes each gradient to the recorded first maximum exactly as the CPU does.
// The argmax indices live in the kernel's workspace between forward and backward.
//   x: (B, C, H, W)  y: (B, C, OH, OW)  workspace (max only): argmax int32 (B, C, OH, OW)
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/pool2d.cuh"
#include "lib/layers/pool2d.h"

namespace trainer {
namespace {

class Pool2dCuda : public LayerKernel {
 public:
  Pool2dCuda(const Pool2d& l, const KernelContext& ctx) : be_(cuda_of(ctx)) {
    const Shape& in = l.input_shape();
    const Shape& out = l.output_shape();
    g_.batch = ctx.batch;
    g_.channels = in[0];
    g_.h = in[1];
    g_.w = in[2];
    g_.oh = out[1];
    g_.ow = out[2];
    g_.kh = l.ph;
    g_.kw = l.pw;
    g_.sh = l.sh;
    g_.sw = l.sw;
    g_.pad_top = l.wh.pad_begin;
    g_.pad_left = l.ww.pad_begin;
    g_.max = l.kind == Pool2d::Kind::max;
  }

  size_t workspace_bytes() const override {
    return g_.max ? size_t(g_.batch * g_.channels * g_.oh * g_.ow) * sizeof(int32_t) : 0;
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

std::unique_ptr<LayerKernel> make_pool2d_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<Pool2dCuda>(static_cast<const Pool2d&>(l), ctx);
}

}  // namespace trainer
