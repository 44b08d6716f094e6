// The two halves of the flag OR (see the header): one warp each, one thread per bit.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/flag_bits.cuh"

namespace trainer::cuda {
namespace {

__global__ void spread_flag_bits_kernel(const uint32_t* word, uint8_t* bytes) {
  const unsigned bit = threadIdx.x;
  bytes[bit] = uint8_t((*word >> bit) & 1u);
}

__global__ void fold_flag_bits_kernel(const uint8_t* bytes, uint32_t* word) {
  // Lane i votes for bit i: the ballot is the word.
  const uint32_t w = __ballot_sync(0xffffffffu, bytes[threadIdx.x] != 0);
  if (threadIdx.x == 0) *word |= w;
}

}  // namespace

void launch_spread_flag_bits(const uint32_t* word, uint8_t* bytes, cudaStream_t stream) {
  spread_flag_bits_kernel<<<1, kFlagBits, 0, stream>>>(word, bytes);
  CUDA_CHECK_LAUNCH();
}

void launch_fold_flag_bits(const uint8_t* bytes, uint32_t* word, cudaStream_t stream) {
  fold_flag_bits_kernel<<<1, kFlagBits, 0, stream>>>(bytes, word);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
