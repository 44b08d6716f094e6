// The one alignment rule, for every arena the model and the executor lay out: parameters,
// gradients, optimizer state (each a parameter-shaped arena with the parameters' offsets),
// buffers, activations and kernel workspaces. Every tensor starts on a kArenaAlign-byte boundary
// (lib/memory/allocator.h; the allocators align each block the same way). Offsets are computed
// here and in no kernel: kernels receive views (lib/backend/layer_kernel.h).
#pragma once

#include <cstddef>

#include "lib/memory/allocator.h"

namespace trainer {

static_assert(kArenaAlign != 0 && (kArenaAlign & (kArenaAlign - 1)) == 0, "kArenaAlign: a power of two");
static_assert(kArenaAlign % 128 == 0, "a tensor starts on a GPU 128-byte line and an AVX-512 vector");
static_assert(kArenaAlign % sizeof(double) == 0, "every element type (f32, bf16, f16, double) stays aligned");

// Tensors placed one after another, each on the alignment; offsets and size in bytes. The size
// is always a multiple of kArenaAlign, so arenas of the same layout can sit back to back
// (parameters | gradients | optimizer state) with every tensor still aligned.
class ArenaLayout {
 public:
  explicit ArenaLayout(size_t limit_bytes) : limit_(limit_bytes) {}
  // Places a tensor of `bytes` at *offset. False (nothing placed) when the arena would exceed
  // the limit; the caller says why in its own terms.
  bool place(size_t bytes, size_t* offset) {
    if (bytes > limit_ - size_) return false;  // size_ <= limit_ always
    const size_t padded = align_up(bytes);
    if (padded > limit_ - size_) return false;
    *offset = size_;
    size_ += padded;
    return true;
  }
  size_t bytes() const { return size_; }

 private:
  size_t limit_, size_ = 0;
};

}  // namespace trainer
