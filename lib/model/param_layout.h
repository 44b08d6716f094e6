// How parameter tensors are laid out in the flat parameter arena: each tensor starts on a
// 64-float (256-byte) boundary, so a layer's second tensor (bias, beta) starts at
// param_slot_floats(numel of the first). Model, CPU kernels and CUDA kernels all use this.
#pragma once

#include <cstdint>

namespace trainer {

constexpr int64_t kParamSlotAlign = 64;  // floats
inline int64_t param_slot_floats(int64_t n) {
  return (n + kParamSlotAlign - 1) / kParamSlotAlign * kParamSlotAlign;
}

}  // namespace trainer
