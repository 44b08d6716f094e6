// maxpool2d / avgpool2d on the shared oneDNN pooling kernel (dnnl_pooling.h).
//   x: (B, C, H, W)  y: (B, C, OH, OW)
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dnnl_pooling.h"
#include "lib/layers/pool2d.h"

namespace trainer {

std::unique_ptr<LayerKernel> make_pool2d_cpu(const Layer& layer, const KernelContext& ctx) {
  const auto& l = static_cast<const Pool2d&>(layer);
  const Shape& in = l.input_shape();
  const Shape& out = l.output_shape();
  PoolGeometry g;
  g.x = {ctx.batch, in[0], in[1], in[2]};
  g.y = {ctx.batch, out[0], out[1], out[2]};
  g.kernel = {l.ph, l.pw};
  g.strides = {l.sh, l.sw};
  g.pad_l = {l.wh.pad_begin, l.ww.pad_begin};
  g.pad_r = {l.wh.pad_end, l.ww.pad_end};
  g.algo = pooling_algorithm(l.kind == Pool2d::Kind::max);
  return make_dnnl_pooling(g, ctx);
}

}  // namespace trainer
