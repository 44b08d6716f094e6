// Gradient clipping by the global L2 norm (torch.nn.utils.clip_grad_norm_), the parts both
// backends share, callable on the host and in CUDA kernels: how the arena is split into the fixed
// partial sums, and the scale factor.
#pragma once

#include <cstdint>

#include "lib/core/host_device.h"

namespace trainer {

// Partial `i` of `parts` sums the squares of g[clip_chunk_begin(n, i, parts) .. begin(n, i+1, parts)).
TRAINER_HD int64_t clip_chunk_begin(int64_t n, int i, int parts) {
  return n / parts * i + (n % parts) * i / parts;
}

// min(1, max_norm / (norm + 1e-6)), PyTorch's clip_coef clamped. A non-finite norm leaves the
// gradients as they are (the non-finite guard then skips the step).
TRAINER_HD float clip_factor(double norm, float max_norm) {
  const double c = double(max_norm) / (norm + 1e-6);
  return c < 1.0 ? float(c) : 1.f;
}

}  // namespace trainer
