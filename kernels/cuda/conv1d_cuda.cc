// conv1d on cuDNN as a 2-D convolution with H = 1, through the shared conv layer kernel
// (cudnn_conv.h, as conv2d uses it): algorithms chosen once per batch size, scratch from the
// workspace, explicit padding into the workspace when the layer's Window is asymmetric, e.g.
// "same" with an even kernel or a stride; bias add and bias gradient as own kernels (bias.cu).
// Backward overwrites dW and db.
//   x: (B, C, L) = (B, C, 1, L)  W: (F, C, k) = (F, C, 1, k)  b: (F)  y: (B, F, OL)
//   W and b: the parameter views 0 and 1.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cudnn_conv.h"
#include "lib/layers/conv1d.h"

namespace trainer {

namespace {

cuda::ConvShape conv1d_shape(const Conv1d& l, const KernelContext& ctx) {
  cuda::ConvShape s;
  s.batch = ctx.batch;
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

}  // namespace

std::unique_ptr<LayerKernel> make_conv1d_cuda(const Layer& layer, const KernelContext& ctx) {
  const auto& l = static_cast<const Conv1d&>(layer);
  return cuda::make_cudnn_conv_layer(conv1d_shape(l, ctx), l.use_bias, ctx, "conv1d '" + l.name() + "'");
}

}  // namespace trainer
