// conv1d on the shared oneDNN convolution kernel (dnnl_conv.h).
//   x: (B, C, L)  W: (F, C, k)  b: (F)  y: (B, F, OL)
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dnnl_conv.h"
#include "lib/layers/conv1d.h"

namespace trainer {

std::unique_ptr<LayerKernel> make_conv1d_cpu(const Layer& layer, const KernelContext& ctx) {
  const auto& l = static_cast<const Conv1d&>(layer);
  const Shape& in = l.input_shape();
  const Shape& out = l.output_shape();
  ConvGeometry g;
  g.x = {ctx.batch, in[0], in[1]};
  g.y = {ctx.batch, out[0], out[1]};
  g.w = {l.filters, in[0], l.k};
  g.strides = {l.stride};
  g.pad_l = {l.w.pad_begin};
  g.pad_r = {l.w.pad_end};
  g.bias = l.use_bias;
  return make_dnnl_conv(g, ctx);
}

}  // namespace trainer
