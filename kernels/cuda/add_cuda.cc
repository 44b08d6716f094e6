// add on the GPU (add.cu): y = x_1 + x_2 + ..., dx_k = dy (copied, or added where the executor
// asks: the input has several consumers). Any activation dtype (KernelContext::act_dtype).
// Layouts: each input comes plain or channels-last (kernels/cuda/channels_last.h), as the layer
// before it wrote it. The output is channels-last when some input is and the consumers take it
// (a residual network's adds stay channels-last between its convolutions), else plain; an input
// in the other layout is transposed on the way in, and its gradient on the way out, through the
// transient workspace.
// Two inputs in the output's layout may hand the forward to the layer after it (a layer norm
// that reads the sum alone; KernelContext::add_to_next, AddHandoff), which then writes y itself.
// Fused relu (KernelContext::fused_relu, registered kFusesRelu; a residual block's add + relu):
// the last sum stores z = relu(y) as the output, and the backward masks dy (the relu's output
// gradient) by z once, into the first input gradient in the output's layout that is written, not
// added to (often dy's own memory, kCopiesOutputGradient), else into dy's memory (this layer is
// its last reader), then hands it on as the unfused add does. Bit for bit the separate relu's
// results, with a pass over the activations and a launch less (resnet18_cifar: 8 a step).
//   x_k, y, dx_k, dy: (B, d...); channels-last only for (B, C, positions...)
#include <algorithm>

#include "kernels/cuda/add.cuh"
#include "kernels/cuda/channels_last.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/eltwise.cuh"
#include "lib/layers/add.h"

namespace trainer {
namespace {

class AddCuda : public LayerKernel {
 public:
  AddCuda(const Layer& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)),
        dtype_(ctx.act_dtype),
        n_(ctx.batch * l.output_shape().numel()),
        batch_(ctx.batch),
        relu_(ctx.fused_relu),
        to_next_(ctx.add_to_next) {
    const Shape& s = l.output_shape();
    channels_ = s.rank() > 0 ? std::max<int64_t>(s[0], 1) : 1;
    positions_ = s.numel() / channels_;
    for (size_t k = 0; k < l.input_shapes().size(); ++k) {
      const std::shared_ptr<const Layout>& in =
          k < ctx.input_layouts.size() ? ctx.input_layouts[k] : (k == 0 ? ctx.input_layout : nullptr);
      in_nhwc_.push_back(cuda::is_channels_last(in));
    }
    out_nhwc_ = cuda::may_write_channels_last(ctx) &&
                std::any_of(in_nhwc_.begin(), in_nhwc_.end(), [](bool b) { return b; });
    for (bool b : in_nhwc_) mixed_ = mixed_ || b != out_nhwc_;
  }

  std::shared_ptr<const Layout> output_layout() const override {
    return out_nhwc_ ? cuda::channels_last() : nullptr;
  }
  // One input (or gradient) in the output's layout at a time.
  size_t workspace_bytes() const override { return mixed_ ? size_t(n_) * dtype_bytes(dtype_) : 0; }
  bool workspace_is_transient() const override { return true; }
  bool accumulates_input_grads() const override { return true; }
  // Element-wise in the output's layout: y may be x_0, or x_1 of two inputs when x_0 needs no
  // transposition (which would go through y first). Backward reads dy only.
  bool may_overwrite_input(size_t k) const override {
    const bool same0 = in_nhwc_[0] == out_nhwc_;
    return (k == 0 && same0) || (k == 1 && in_nhwc_.size() == 2 && same0 && in_nhwc_[1] == out_nhwc_);
  }
  bool backward_reads_output() const override { return relu_; }  // a fused relu's mask

  void bind(const KernelBinding& b) override {
    x_.clear();
    dx_.clear();
    accumulate_.clear();
    for (size_t k = 0; k < b.inputs.size(); ++k) {
      x_.push_back(b.input(k).as(dtype_));
      dx_.push_back(b.input_grad(k).as(dtype_));
      accumulate_.push_back(k < b.accumulate_input_grads.size() && b.accumulate_input_grads[k]);
    }
    y_ = b.output.as(dtype_);
    dy_ = b.output_grad.as(dtype_);
    ws_ = b.workspace;
    if (to_next_) {  // the layer after binds next, and may compute the sum itself
      *to_next_ = AddHandoff{};
      to_next_->ok = x_.size() == 2 && !mixed_ && !relu_;
      to_next_->a = x_[0];
      to_next_->b = x_[1];
      to_next_->sum = y_;
      to_next_->n = n_;
    }
  }

  void forward(bool) override {
    if (to_next_ && to_next_->taken) return;
    // Input k in the output's layout: itself, or transposed into `to`.
    const auto in = [&](size_t k, void* to) -> const void* {
      if (in_nhwc_[k] == out_nhwc_) return x_[k];
      relayout(x_[k], in_nhwc_[k], to, out_nhwc_);
      return to;
    };
    const void* a = in(0, y_);   // y holds a transposed first input until the sum overwrites it
    const size_t m = x_.size();  // the last sum applies a fused relu
    cuda::launch_add(dtype_, a, in(1, ws_), y_, n_, be_.stream(), relu_ && m == 2);
    for (size_t k = 2; k < m; ++k)
      cuda::launch_add(dtype_, y_, in(k, ws_), y_, n_, be_.stream(), relu_ && k + 1 == m);
  }

  void backward() override {
    const void* g = dy_;  // the gradient at the sum
    if (relu_) {
      void* to = nullptr;
      for (size_t k = 0; k < dx_.size() && !to; ++k)
        if (dx_[k] && !accumulate_[k] && in_nhwc_[k] == out_nhwc_) to = dx_[k];
      if (!to) to = const_cast<void*>(dy_);
      // The relu kernel's backward, given its output z = y for its input: z > 0 exactly where the
      // input is (lib/core/relu_formula.h), so the same bits.
      cuda::launch_eltwise_backward(cuda::Eltwise::relu, 0.f, dtype_, y_, dy_, to, n_, be_.stream());
      g = to;
    }
    for (size_t k = 0; k < dx_.size(); ++k) {
      if (!dx_[k]) continue;
      const bool same = in_nhwc_[k] == out_nhwc_;
      if (!accumulate_[k]) {
        if (same && dx_[k] == g) continue;  // dy's memory (kCopiesOutputGradient), or the masked gradient's
        if (same)
          CUDA_CHECK(cudaMemcpyAsync(dx_[k], g, size_t(n_) * dtype_bytes(dtype_), cudaMemcpyDeviceToDevice,
                                     be_.stream()));
        else
          relayout(g, out_nhwc_, dx_[k], in_nhwc_[k]);
        continue;
      }
      const void* d = g;
      if (!same) {
        relayout(g, out_nhwc_, ws_, in_nhwc_[k]);
        d = ws_;
      }
      cuda::launch_add(dtype_, dx_[k], d, dx_[k], n_, be_.stream());
    }
  }

 private:
  void relayout(const void* src, bool src_nhwc, void* dst, bool dst_nhwc) const {
    cuda::launch_relayout(dtype_, src, src_nhwc, channels_, dst, dst_nhwc, channels_, batch_, positions_,
                          be_.stream());
  }

  CudaBackend& be_;
  DType dtype_;
  int64_t n_, batch_, channels_ = 1, positions_ = 1;
  std::vector<bool> in_nhwc_;
  bool relu_;  // KernelContext::fused_relu
  bool out_nhwc_ = false, mixed_ = false;
  std::vector<const void*> x_;
  std::vector<void*> dx_;
  std::vector<bool> accumulate_;
  void* y_ = nullptr;
  const void* dy_ = nullptr;
  void* ws_ = nullptr;
  std::shared_ptr<AddHandoff> to_next_;
};

}  // namespace

std::unique_ptr<LayerKernel> make_add_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<AddCuda>(l, ctx);
}

}  // namespace trainer
