// conv1d on oneDNN: forward, backward-data and backward-weights primitives on 3-D (ncw / oiw)
// memory, created once per batch size and executed every step by the shared weighted kernel
// (dnnl_weighted.h).
//   x: (B, C, L)  W: (F, C, k)  b: (F)  y: (B, F, OL)
// The bias sits at the next 64-float slot after W, as Model lays the arena out.
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/dnnl_weighted.h"
#include "lib/layers/conv1d.h"

namespace trainer {

std::unique_ptr<LayerKernel> make_conv1d_cpu(const Layer& layer, const KernelContext& ctx) {
  const auto& l = static_cast<const Conv1d&>(layer);
  const Shape& in = l.input_shape();
  const Shape& out = l.output_shape();
  const dnnl::engine& e = dnnl_of(ctx).engine;
  WeightedPlan p;
  p.bias = l.use_bias;
  p.x = plain_md({ctx.batch, in[0], in[1]});
  p.y = plain_md({ctx.batch, out[0], out[1]});
  p.w = plain_md({l.filters, in[0], l.k});
  p.b = plain_md({l.filters});
  dnnl::memory::dims strides{l.stride}, pad_l{l.w.pad_begin}, pad_r{l.w.pad_end};
  const auto algo = dnnl::algorithm::convolution_direct;
  const auto fwd_kind = dnnl::prop_kind::forward_training;
  DNNL_CHECK({
    auto fd = p.bias
                  ? dnnl::convolution_forward::desc(fwd_kind, algo, p.x, p.w, p.b, p.y, strides, pad_l, pad_r)
                  : dnnl::convolution_forward::desc(fwd_kind, algo, p.x, p.w, p.y, strides, pad_l, pad_r);
    dnnl::convolution_forward::primitive_desc fwd_pd(fd, e);
    p.fwd = dnnl::convolution_forward(fwd_pd);
    dnnl::convolution_backward_data::desc bdd(algo, p.x, p.w, p.y, strides, pad_l, pad_r);
    p.bwd_data =
        dnnl::convolution_backward_data(dnnl::convolution_backward_data::primitive_desc(bdd, e, fwd_pd));
    auto bwd = p.bias
                   ? dnnl::convolution_backward_weights::desc(algo, p.x, p.w, p.b, p.y, strides, pad_l, pad_r)
                   : dnnl::convolution_backward_weights::desc(algo, p.x, p.w, p.y, strides, pad_l, pad_r);
    p.bwd_weights = dnnl::convolution_backward_weights(
        dnnl::convolution_backward_weights::primitive_desc(bwd, e, fwd_pd));
  });
  return make_dnnl_weighted(p, ctx);
}

}  // namespace trainer
