// Channels-last (NHWC) activations on the GPU: the layout cuDNN's tensor-core convolutions want
// for bf16. Only a low-precision plan produces it: a convolution whose output goes to a layer that
// takes any layout (KernelContext::output_layout_free) writes NHWC, and batchnorm, pooling and the
// element-wise activations keep it; a kernel whose consumer needs plain NCHW (flatten, add,
// layers with an f32 edge) transposes its output (OutputEdge below), and a convolution fed plain
// NCHW transposes its input. So the conversions are at the edges of each channels-last chain.
//   A tensor (B, C, H, W) in NHWC is stored as (B, H, W, C); its shape (TensorView::shape) stays
//   the logical (B, C, H, W).
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "lib/backend/layer_kernel.h"

namespace trainer::cuda {

struct ChannelsLast final : Layout {};

// The one ChannelsLast object every kernel reports and compares.
inline const std::shared_ptr<const Layout>& channels_last() {
  static const std::shared_ptr<const Layout> l = std::make_shared<const ChannelsLast>();
  return l;
}
inline bool is_channels_last(const std::shared_ptr<const Layout>& l) {
  return dynamic_cast<const ChannelsLast*>(l.get()) != nullptr;
}

// Whether a kernel with this context may write its 4-D output channels-last: low precision only.
inline bool may_write_channels_last(const KernelContext& ctx) {
  return ctx.output_layout_free && ctx.act_dtype != DType::f32;
}

// dst = src between layouts, dtype t, src and dst distinct: each (B, C, P) tensor (P positions)
// stored NCHW (B, C, P) or NHWC (B, P, C); channels dst_c >= src_c are zero (padding channels to
// a multiple of 8 for the tensor cores), channels >= dst_c of src are dropped (unpadding).
void launch_relayout(DType t, const void* src, bool src_nhwc, int64_t src_c, void* dst, bool dst_nhwc,
                     int64_t dst_c, int64_t b, int64_t positions, cudaStream_t stream);
// A (B, C, H, W) tensor of dtype t between NCHW and NHWC (src and dst distinct).
void launch_nchw_to_nhwc(DType t, const void* src, void* dst, int64_t b, int64_t c, int64_t h, int64_t w,
                         cudaStream_t stream);
void launch_nhwc_to_nchw(DType t, const void* src, void* dst, int64_t b, int64_t c, int64_t h, int64_t w,
                         cudaStream_t stream);
// Convolution filters: f32 (K, C, R, S) to dtype t (K, R, S, cp) for NHWC convolutions (channels
// C..cp zero), and their gradient back: dw (K, C, R, S) f32 = src (K, R, S, cp) of dtype t.
void launch_filter_to_krsc(const float* w, DType t, void* dst, int64_t k, int64_t c, int64_t cp, int64_t r,
                           int64_t s, cudaStream_t stream);
void launch_krsc_to_filter(DType t, const void* src, float* dw, int64_t k, int64_t c, int64_t cp, int64_t r,
                           int64_t s, cudaStream_t stream);

// The output side of a kernel whose core computes in one layout (core_nhwc) while its output must
// be in another (plain NCHW: the consumer needs it): the core writes y into a workspace buffer,
// which is transposed into the output; backward transposes dy into that buffer first. When the
// layouts agree it passes the tensors through and needs no workspace.
class OutputEdge {
 public:
  OutputEdge() = default;
  // dims: the output (B, C, H, W); output_nhwc: the layout the output is bound in.
  OutputEdge(DType t, bool core_nhwc, bool output_nhwc, int64_t b, int64_t c, int64_t h, int64_t w)
      : t_(t), transpose_(core_nhwc != output_nhwc), core_nhwc_(core_nhwc), b_(b), c_(c), h_(h), w_(w) {}
  size_t workspace_bytes() const { return transpose_ ? size_t(b_ * c_ * h_ * w_) * dtype_bytes(t_) : 0; }
  // dy_workspace: where core_dy() transposes dy, another workspace_bytes() (a core whose backward
  // still reads its y, a fused relu's mask); null: y's buffer, which the backward then overwrites.
  void bind(void* workspace, void* y, const void* dy, void* dy_workspace = nullptr) {
    buffer_ = workspace;
    dy_buffer_ = dy_workspace ? dy_workspace : workspace;
    y_ = y;
    dy_ = dy;
  }
  // Where the core writes y.
  void* core_y() const { return transpose_ ? buffer_ : y_; }
  // After the core's forward: y in the output's layout.
  void finish_forward(cudaStream_t stream) const {
    if (!transpose_) return;
    if (core_nhwc_)
      launch_nhwc_to_nchw(t_, buffer_, y_, b_, c_, h_, w_, stream);
    else
      launch_nchw_to_nhwc(t_, buffer_, y_, b_, c_, h_, w_, stream);
  }
  // Before the core's backward: dy in the core's layout.
  const void* core_dy(cudaStream_t stream) const {
    if (!transpose_) return dy_;
    if (core_nhwc_)
      launch_nchw_to_nhwc(t_, dy_, dy_buffer_, b_, c_, h_, w_, stream);
    else
      launch_nhwc_to_nchw(t_, dy_, dy_buffer_, b_, c_, h_, w_, stream);
    return dy_buffer_;
  }

 private:
  DType t_ = DType::f32;
  bool transpose_ = false, core_nhwc_ = false;
  int64_t b_ = 0, c_ = 0, h_ = 0, w_ = 0;
  void* buffer_ = nullptr;
  void* dy_buffer_ = nullptr;
  void* y_ = nullptr;
  const void* dy_ = nullptr;
};

}  // namespace trainer::cuda
