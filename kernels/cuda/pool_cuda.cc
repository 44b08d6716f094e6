// maxpool2d / avgpool2d and maxpool1d / avgpool1d on own kernels (pool2d.cu); 1-D pooling runs as
// 2-D with H = 1: x (B, C, L) = (B, C, 1, L). The kernels take the layer's resolved Window
// paddings as they are, asymmetric "same" included, which cuDNN's pooling descriptor cannot; max
// keeps the first maximum of the in-bounds window and its backward routes each gradient there,
// avg divides by the in-bounds count (padding excluded), backward gathers without atomics; all as
// the CPU (oneDNN) computes. The argmax indices live in the workspace between forward and backward.
// Any activation dtype (KernelContext::act_dtype), compared and summed in f32. A channels-last
// input is pooled in that layout, and the output stays channels-last unless the consumer needs
// plain NCHW (an OutputEdge transposes it; its buffer follows the argmax in the workspace).
// Fused relu (KernelContext::fused_relu, registered kFusesRelu): the pooled values are stored
// through a relu, and the backward masks the output's gradient by the stored output (z > 0), so
// the usual pool -> relu pair (PyTorch's MNIST example) runs two kernels a step instead of four.
// The batchnorm before it applied as x is read (KernelContext::normalize_from_input,
// NormalizeHandoff; registered kTakesNormalize): where this pooling alone reads a batchnorm's
// output (after its fused relu) and its windows tile the input, channels-last by packs, the forward
// pools relu(bn(x)) from the batchnorm's input and the batchnorm writes no output (VGG's conv ->
// batchnorm -> relu -> 2x2 max pool: the batchnorm's output written once and read back less).
// The same y and argmax; the backward is unchanged.
//   x: (B, C, H, W)  y: (B, C, OH, OW)  workspace (max only): argmax (B, C, OH, OW), a byte a value for
//   2x2-like windows (pool2d_argmax_bytes)
#include "kernels/cuda/channels_last.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/pool2d.cuh"
#include "lib/layers/pool1d.h"
#include "lib/layers/pool2d.h"

namespace trainer {
namespace {

class PoolCuda : public LayerKernel {
 public:
  PoolCuda(cuda::PoolGeometry g, const KernelContext& ctx)
      : be_(cuda_of(ctx)),
        g_(with_layout(g, ctx)),
        dtype_(ctx.act_dtype),
        out_nhwc_(g_.channels_last && cuda::may_write_channels_last(ctx)),
        out_(dtype_, g_.channels_last, out_nhwc_, g_.batch, g_.channels, g_.oh, g_.ow),
        from_bn_(ctx.normalize_from_input) {}

  std::shared_ptr<const Layout> output_layout() const override {
    return out_nhwc_ ? cuda::channels_last() : nullptr;
  }
  // [argmax] [the output edge's core y] [its core dy, with a fused relu: the backward still
  // reads z there]
  size_t workspace_bytes() const override {
    return align_up(argmax_bytes()) + align_up(out_.workspace_bytes()) * (g_.relu ? 2 : 1);
  }
  void bind(const KernelBinding& b) override {
    a_ = TypedActivations(b, dtype_);
    argmax_ = b.workspace;
    char* edge = static_cast<char*>(b.workspace) + align_up(argmax_bytes());
    out_.bind(edge, a_.y, a_.dy, g_.relu ? edge + align_up(out_.workspace_bytes()) : nullptr);
    takes_bn_ = from_bn_ && from_bn_->ok && a_.x == from_bn_->y &&
                cuda::pool2d_normalizes(g_, dtype_, from_bn_->x, out_.core_y(), argmax_);
    if (takes_bn_) from_bn_->taken = true;
  }

  void forward(bool) override {
    if (takes_bn_) {
      const NormalizeHandoff& h = *from_bn_;
      cuda::launch_pool2d_forward_normalized(g_, dtype_, h.x, {h.mean, h.inv, h.gamma, h.beta, h.relu},
                                             out_.core_y(), argmax_, be_.stream());
    } else {
      cuda::launch_pool2d_forward(g_, dtype_, a_.x, out_.core_y(), argmax_, be_.stream());
    }
    out_.finish_forward(be_.stream());
  }

  void backward() override {
    if (a_.dx)
      cuda::launch_pool2d_backward(g_, dtype_, out_.core_dy(be_.stream()), out_.core_y(), argmax_, a_.dx,
                                   be_.stream());
  }

 private:
  TypedActivations a_;
  CudaBackend& be_;
  cuda::PoolGeometry g_;
  DType dtype_;
  bool out_nhwc_;
  cuda::OutputEdge out_;
  void* argmax_ = nullptr;
  std::shared_ptr<NormalizeHandoff> from_bn_;  // KernelContext::normalize_from_input
  bool takes_bn_ = false;                      // this binding applies it (NormalizeHandoff::taken)

  size_t argmax_bytes() const { return g_.max ? cuda::pool2d_argmax_bytes(g_) : 0; }
  static cuda::PoolGeometry with_layout(cuda::PoolGeometry g, const KernelContext& ctx) {
    g.channels_last = cuda::is_channels_last(ctx.input_layout);
    g.relu = ctx.fused_relu;
    return g;
  }
};

}  // namespace

std::unique_ptr<LayerKernel> make_pool2d_cuda(const Layer& layer, const KernelContext& ctx) {
  const auto& l = static_cast<const Pool2d&>(layer);
  const Shape& in = l.input_shape();
  const Shape& out = l.output_shape();
  cuda::PoolGeometry g;
  g.batch = ctx.batch;
  g.channels = in[0];
  g.h = in[1];
  g.w = in[2];
  g.oh = out[1];
  g.ow = out[2];
  g.kh = l.ph;
  g.kw = l.pw;
  g.sh = l.sh;
  g.sw = l.sw;
  g.pad_top = l.wh.pad_begin;
  g.pad_left = l.ww.pad_begin;
  g.max = l.kind == Pool2d::Kind::max;
  return std::make_unique<PoolCuda>(g, ctx);
}

std::unique_ptr<LayerKernel> make_pool1d_cuda(const Layer& layer, const KernelContext& ctx) {
  const auto& l = static_cast<const Pool1d&>(layer);
  cuda::PoolGeometry g;  // H = 1: kh = sh = 1, no top padding
  g.batch = ctx.batch;
  g.channels = l.input_shape()[0];
  g.h = 1;
  g.w = l.input_shape()[1];
  g.oh = 1;
  g.ow = l.output_shape()[1];
  g.kw = l.size;
  g.sw = l.stride;
  g.pad_left = l.w.pad_begin;
  g.max = l.kind == Pool1d::Kind::max;
  return std::make_unique<PoolCuda>(g, ctx);
}

}  // namespace trainer
