// dense on oneDNN inner product, executed by the shared weighted kernel (dnnl_weighted.h).
//   x: (B, in)  W: (units, in)  b: (units)  y: (B, units)
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dnnl_weighted.h"
#include "lib/layers/dense.h"

namespace trainer {

std::unique_ptr<LayerKernel> make_dense_cpu(const Layer& layer, const KernelContext& ctx) {
  const auto& l = static_cast<const Dense&>(layer);
  const dnnl::engine& e = dnnl_of(ctx).engine;
  WeightedPlan p;
  p.bias = l.use_bias;
  p.x = plain_md({ctx.batch, l.in_features()});
  p.y = plain_md({ctx.batch, l.units});
  p.w = plain_md({l.units, l.in_features()});
  p.b = plain_md({l.units});
  const auto fwd_kind = dnnl::prop_kind::forward_training;
  DNNL_CHECK({
    auto fd = p.bias ? dnnl::inner_product_forward::desc(fwd_kind, p.x, p.w, p.b, p.y)
                     : dnnl::inner_product_forward::desc(fwd_kind, p.x, p.w, p.y);
    dnnl::inner_product_forward::primitive_desc fwd_pd(fd, e);
    p.fwd = dnnl::inner_product_forward(fwd_pd);
    dnnl::inner_product_backward_data::desc bdd(p.x, p.w, p.y);
    p.bwd_data =
        dnnl::inner_product_backward_data(dnnl::inner_product_backward_data::primitive_desc(bdd, e, fwd_pd));
    auto bwd = p.bias ? dnnl::inner_product_backward_weights::desc(p.x, p.w, p.b, p.y)
                      : dnnl::inner_product_backward_weights::desc(p.x, p.w, p.y);
    p.bwd_weights = dnnl::inner_product_backward_weights(
        dnnl::inner_product_backward_weights::primitive_desc(bwd, e, fwd_pd));
  });
  return make_dnnl_weighted(p, ctx);
}

}  // namespace trainer
