// conv2d on cuDNN: the shared conv layer kernel (cudnn_conv.h, as conv1d uses it): descriptors and
// algorithms chosen once per batch size (deterministic restriction, strict fp32 or tf32 math,
// scratch capped and taken from the workspace), explicit padding into the workspace when the
// layer's Windows are asymmetric (TensorFlow "same" with an even kernel or a stride), bias add
// and bias gradient as own kernels (bias.cu). Backward overwrites dW and db.
//   x: (B, C, H, W)  W: (F, C, kh, kw)  b: (F)  y: (B, F, OH, OW)
//   W and b: the parameter views 0 and 1.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/cudnn_conv.h"
#include "lib/layers/conv2d.h"

namespace trainer {

namespace {

cuda::ConvShape conv2d_shape(const Conv2d& l, const KernelContext& ctx) {
  const Shape& in = l.input_shape();
  const Shape& out = l.output_shape();
  cuda::ConvShape s;
  s.batch = ctx.batch;
  s.channels = in[0];
  s.h = in[1];
  s.w = in[2];
  s.filters = l.filters;
  s.kh = l.kh;
  s.kw = l.kw;
  s.sh = l.sh;
  s.sw = l.sw;
  s.pad_top = l.wh.pad_begin;
  s.pad_bottom = l.wh.pad_end;
  s.pad_left = l.ww.pad_begin;
  s.pad_right = l.ww.pad_end;
  s.oh = out[1];
  s.ow = out[2];
  s.groups = l.groups;
  return s;
}

}  // namespace

std::unique_ptr<LayerKernel> make_conv2d_cuda(const Layer& layer, const KernelContext& ctx) {
  const auto& l = static_cast<const Conv2d&>(layer);
  return cuda::make_cudnn_conv_layer(conv2d_shape(l, ctx), l.use_bias, ctx, "conv2d '" + l.name() + "'");
}

}  // namespace trainer
