// The embedding row of a token id, one formula for the CPU and CUDA kernels: ids arrive as floats;
// an integral id in [0, V) is its own row, anything else is clamped to [0, V-1] (NaN -> 0), since
// a kernel cannot stop mid-step (the kernels warn once instead).
#pragma once

#include <cstdint>

#include "lib/core/host_device.h"

namespace trainer {

// last = V - 1; last_f = float(V - 1), rounded once on the host so both backends compare alike.
TRAINER_HD int64_t embedding_row(float id, float last_f, int64_t last) {
  if (!(id > 0.f)) return 0;
  if (id >= last_f) return last;
  return int64_t(id);
}

}  // namespace trainer
