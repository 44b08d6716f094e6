// conv2d on the shared oneDNN convolution kernel (dnnl_conv.h).
//   x: (B, C, H, W)  W: (F, C/groups, kh, kw)  b: (F)  y: (B, F, OH, OW)
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dnnl_conv.h"
#include "lib/layers/conv2d.h"

namespace trainer {

std::unique_ptr<LayerKernel> make_conv2d_cpu(const Layer& layer, const KernelContext& ctx) {
  const auto& l = static_cast<const Conv2d&>(layer);
  const Shape& in = l.input_shape();
  const Shape& out = l.output_shape();
  ConvGeometry g;
  g.x = {ctx.batch, in[0], in[1], in[2]};
  g.y = {ctx.batch, out[0], out[1], out[2]};
  g.w = {l.filters, in[0] / l.groups, l.kh, l.kw};
  g.groups = l.groups;
  g.strides = {l.sh, l.sw};
  g.pad_l = {l.wh.pad_begin, l.ww.pad_begin};
  g.pad_r = {l.wh.pad_end, l.ww.pad_end};
  g.bias = l.use_bias;
  return make_dnnl_conv(g, ctx);
}

}  // namespace trainer
