// A bitwise OR over replicas from a collective that has only arithmetic reductions (NCCL): the
// flag word is spread into one byte per bit, the bytes are reduced with max, and folded back.
//   word: one uint32 of device memory  bytes: kFlagBits bytes of device memory
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace trainer::cuda {

constexpr int kFlagBits = 32;

// bytes[i] = bit i of *word (0 or 1), i < kFlagBits.
void launch_spread_flag_bits(const uint32_t* word, uint8_t* bytes, cudaStream_t stream);
// *word |= the bits i whose bytes[i] is not 0 (bits set since the spread stay).
void launch_fold_flag_bits(const uint8_t* bytes, uint32_t* word, cudaStream_t stream);

}  // namespace trainer::cuda
