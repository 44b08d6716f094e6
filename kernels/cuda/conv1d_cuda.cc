// conv1d on cuDNN as a 2-D convolution with H = 1 (cudnn_conv.h: algorithms chosen once per
// batch size, scratch from the workspace, explicit padding into the workspace when the layer's
// Window is asymmetric, e.g. "same" with an even kernel or a stride). Bias add and bias gradient
// are own kernels (bias.cu). Backward overwrites dW and db.
//   x: (B, C, L) = (B, C, 1, L)  W: (F, C, k) = (F, C, 1, k)  b: (F)  y: (B, F, OL)
//   params: [W | pad to 64 floats | b], as Model lays the arena out.
#include "kernels/cuda/bias.cuh"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cudnn_conv.h"
#include "lib/layers/conv1d.h"

namespace trainer {
namespace {

cuda::ConvShape conv_shape(const Conv1d& l, int64_t batch) {
  cuda::ConvShape s;
  s.batch = batch;
  s.channels = l.input_shape()[0];
  s.h = 1;
  s.w = l.input_shape()[1];
  s.filters = l.filters;
  s.kh = 1;
  s.kw = l.k;
  s.sh = 1;
  s.sw = l.stride;
  s.pad_left = l.w.pad_begin;
  s.pad_right = l.w.pad_end;
  s.oh = 1;
  s.ow = l.output_shape()[1];
  return s;
}

class Conv1dCuda : public LayerKernel {
 public:
  Conv1dCuda(const Conv1d& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)), bias_(l.use_bias), batch_(ctx.batch), filters_(l.filters),
        out_len_(l.output_shape()[1]),
        bias_offset_(param_slot_floats(l.filters * l.input_shape()[0] * l.k)),
        conv_(be_, conv_shape(l, ctx.batch), ctx, "conv1d '" + l.name() + "'") {}

  size_t workspace_bytes() const override { return conv_.workspace_bytes(); }

  void bind(float* params, float* grads, float*, void* ws) override {
    w_ = params;
    dw_ = grads;
    if (bias_) {
      b_ = params + bias_offset_;
      db_ = grads + bias_offset_;
    }
    conv_.bind(ws);
  }

  void forward(const float* x, float* y, bool) override {
    conv_.forward(x, w_, y);
    if (bias_) cuda::launch_bias_add(y, b_, batch_, filters_, out_len_, be_.stream());
  }

  void backward(const float* x, const float*, const float* dy, float* dx) override {
    conv_.backward(x, w_, dy, dw_, dx);
    if (bias_) cuda::launch_bias_grad(dy, db_, batch_, filters_, out_len_, be_.stream());
  }

 private:
  CudaBackend& be_;
  bool bias_;
  int64_t batch_, filters_, out_len_, bias_offset_;
  cuda::CudnnConv conv_;
  const float *w_ = nullptr, *b_ = nullptr;
  float *dw_ = nullptr, *db_ = nullptr;
};

}  // namespace

std::unique_ptr<LayerKernel> make_conv1d_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<Conv1dCuda>(static_cast<const Conv1d&>(l), ctx);
}

}  // namespace trainer
