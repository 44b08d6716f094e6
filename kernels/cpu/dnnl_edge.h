// A tensor between layers (in the layout agreed with its neighbour: plain, or a blocked layout
// chosen by the previous kernel), as seen by one primitive that may want another layout. Where
// the two differ, a reorder into/out of a scratch slice of the kernel's workspace runs at the
// edge. Also: reading KernelContext's opaque layouts as oneDNN memory descriptors.
#pragma once

#include "kernels/cpu/dnnl_context.h"
#include "lib/backend/layer_kernel.h"
#include "lib/memory/allocator.h"

namespace trainer {

struct Edge {
  dnnl::memory outer, inner;  // inner == outer when no reorder is needed
  dnnl::reorder to_inner, to_outer;
  bool reorder = false;
  size_t scratch_bytes = 0;

  void init(const dnnl::memory::desc& outer_md, const dnnl::memory::desc& want, const dnnl::engine& e,
            bool in, bool out) {
    outer = dnnl::memory(outer_md, e, DNNL_MEMORY_NONE);
    reorder = want != outer_md;
    if (!reorder) {
      inner = outer;
      return;
    }
    inner = dnnl::memory(want, e, DNNL_MEMORY_NONE);
    scratch_bytes = align_up(want.get_size());
    if (in) to_inner = dnnl::reorder(outer, inner);
    if (out) to_outer = dnnl::reorder(inner, outer);
  }
  // Binds the scratch for the inner layout; returns the bytes consumed.
  size_t bind_scratch(char* ws) {
    if (reorder) inner.set_data_handle(ws);
    return scratch_bytes;
  }
  void in(dnnl::stream& s, const void* p) {
    outer.set_data_handle(const_cast<void*>(p));
    if (reorder) to_inner.execute(s, outer, inner);
  }
  void set_out(void* p) { outer.set_data_handle(p); }
  void out(dnnl::stream& s) {
    if (reorder) to_outer.execute(s, inner, outer);
  }
};

// The CPU backend's layout handle (lib/backend/layer_kernel.h): a oneDNN memory descriptor.
struct DnnlLayout final : Layout {
  explicit DnnlLayout(const dnnl::memory::desc& d) : md(d) {}
  dnnl::memory::desc md;
};

// The layout of this kernel's input: the previous kernel's descriptor, or plain for dims.
inline dnnl::memory::desc input_md(const KernelContext& ctx, const dnnl::memory::dims& dims) {
  if (!ctx.input_layout) return plain_md(dims);
  const auto* layout = dynamic_cast<const DnnlLayout*>(ctx.input_layout.get());
  if (!layout) throw InternalError("a CPU kernel was given another backend's input layout");
  if (layout->md.dims() != dims) throw InternalError("input layout with other dims than the layer's input");
  return layout->md;
}

// What output_layout() reports for a chosen output descriptor: null when it is plain. Made once,
// when the kernel is created.
inline std::shared_ptr<const Layout> layout_of(const dnnl::memory::desc& md) {
  if (md == plain_md(md.dims())) return nullptr;
  return std::make_shared<const DnnlLayout>(md);
}

}  // namespace trainer
