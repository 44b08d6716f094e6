// The second half of a staged upload (CudaBackend::upload_inputs): the pieces a copy engine put in
// the landing zone, packed from 16-byte boundaries (Backend::landing_bytes), moved to their places
// by one kernel on the compute stream.
//   landing: sum of align_up(bytes[i], 16)  dst[i]: bytes[i], a multiple of 4
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace trainer::cuda {

constexpr int kMaxUnpackPieces = 4;

struct UnpackPieces {
  int n = 0;
  void* dst[kMaxUnpackPieces] = {};
  size_t offset[kMaxUnpackPieces] = {};  // into the landing zone
  size_t bytes[kMaxUnpackPieces] = {};
};

void launch_unpack_upload(const void* landing, const UnpackPieces& pieces, cudaStream_t stream);

}  // namespace trainer::cuda
