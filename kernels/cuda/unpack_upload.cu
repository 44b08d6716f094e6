// Staged upload, landing zone -> places (unpack_upload.cuh). Block row y copies piece y: 16-byte
// words where the destination allows (the executor's arena and buffers are 256-byte aligned),
// then the last 4-byte words; grid-stride over x.
#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/unpack_upload.cuh"

namespace trainer::cuda {
namespace {

constexpr int kBlock = 256;

__global__ void unpack_upload_kernel(const char* __restrict__ landing, UnpackPieces p) {
  const int k = blockIdx.y;
  const char* src = landing + p.offset[k];
  char* dst = static_cast<char*>(p.dst[k]);
  const size_t bytes = p.bytes[k];
  const size_t stride = size_t(gridDim.x) * kBlock, first = size_t(blockIdx.x) * kBlock + threadIdx.x;
  size_t done = 0;
  if (reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
    const size_t words = bytes / 16;
    for (size_t i = first; i < words; i += stride)
      reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
    done = words * 16;
  }
  const size_t tail = (bytes - done) / 4;
  for (size_t i = first; i < tail; i += stride)
    reinterpret_cast<uint32_t*>(dst + done)[i] = reinterpret_cast<const uint32_t*>(src + done)[i];
}

}  // namespace

void launch_unpack_upload(const void* landing, const UnpackPieces& pieces, cudaStream_t stream) {
  if (pieces.n <= 0) return;
  size_t most = 0;
  for (int k = 0; k < pieces.n; ++k) most = std::max(most, pieces.bytes[k]);
  const size_t blocks = std::min<size_t>((most / 16 + kBlock - 1) / kBlock, 1024);
  unpack_upload_kernel<<<dim3(unsigned(std::max<size_t>(blocks, 1)), unsigned(pieces.n)), kBlock, 0,
                         stream>>>(static_cast<const char*>(landing), pieces);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
