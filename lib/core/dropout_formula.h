// Dropout's mask, one formula for the CPU and CUDA kernels: element i of the batch tensor belongs
// to unit i / channel_size (1 for dropout, H*W for dropout2d), draws
// counter_uniform(seed, dropout_stream(step, layer), unit) and survives when the draw is >= rate.
// The mask is stored as 0 or 1/(1-rate), so forward and backward are one multiply per element.
#pragma once

#include <cstdint>

#include "lib/core/counter_rng.h"
#include "lib/core/host_device.h"

namespace trainer {

TRAINER_HD float dropout_keep_scale(float rate) { return div_rn(1.f, sub_rn(1.f, rate)); }

// The mask value (0 or keep_scale) of one unit; element i of the batch tensor belongs to unit
// i / channel_size.
TRAINER_HD float dropout_mask(uint64_t seed, uint64_t stream, uint64_t unit, float rate, float keep_scale) {
  return counter_uniform(seed, stream, unit) >= rate ? keep_scale : 0.f;
}

}  // namespace trainer
