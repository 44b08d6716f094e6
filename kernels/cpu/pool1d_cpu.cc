// maxpool1d / avgpool1d and global_avg_pool / global_max_pool on the shared oneDNN pooling kernel
// (dnnl_pooling.h), which takes 1-D pooling's input in any layout (nCw16c from conv1d...).
//   pool1d:          x: (B, C, L)  -> y: (B, C, OL)
//   global_avg_pool: x: (B, C, S...) -> y: (B, C), planned as a window covering all of S with the
//                    output (B, C, 1, ...), which is the same memory as (B, C).
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dnnl_pooling.h"
#include "lib/layers/global_pool.h"
#include "lib/layers/pool1d.h"

namespace trainer {

std::unique_ptr<LayerKernel> make_pool1d_cpu(const Layer& layer, const KernelContext& ctx) {
  const auto& l = static_cast<const Pool1d&>(layer);
  const Shape& in = l.input_shape();
  PoolGeometry g;
  g.x = {ctx.batch, in[0], in[1]};
  g.y = {ctx.batch, in[0], l.output_shape()[1]};
  g.kernel = {l.size};
  g.strides = {l.stride};
  g.pad_l = {l.w.pad_begin};
  g.pad_r = {l.w.pad_end};
  g.algo = pooling_algorithm(l.kind == Pool1d::Kind::max);
  return make_dnnl_pooling(g, ctx);
}

// global_avg_pool and global_max_pool: one window over every spatial position.
static std::unique_ptr<LayerKernel> make_global_pool_cpu(const Layer& layer, const KernelContext& ctx,
                                                         bool max) {
  const Shape& in = layer.input_shape();
  PoolGeometry g;
  g.x = {ctx.batch, in[0]};
  g.y = {ctx.batch, in[0]};
  for (size_t i = 1; i < in.rank(); ++i) {
    g.x.push_back(in[i]);
    g.y.push_back(1);
    g.kernel.push_back(in[i]);
    g.strides.push_back(1);
    g.pad_l.push_back(0);
    g.pad_r.push_back(0);
  }
  g.algo = pooling_algorithm(max);
  return make_dnnl_pooling(g, ctx);
}

std::unique_ptr<LayerKernel> make_global_avg_pool_cpu(const Layer& layer, const KernelContext& ctx) {
  return make_global_pool_cpu(layer, ctx, false);
}

std::unique_ptr<LayerKernel> make_global_max_pool_cpu(const Layer& layer, const KernelContext& ctx) {
  return make_global_pool_cpu(layer, ctx, true);
}

}  // namespace trainer
