// The Backend contract's defaults that need more than a line: device collectives, which only a
// backend with a collective library (NCCL on the CUDA backend) overrides, the copies between
// the backends of pipeline stages, which a backend of host memory does with memcpy, and a step's
// uploads one piece at a time.
#include "lib/backend/backend.h"

#include <cstring>

#include "lib/core/error.h"
#include "lib/memory/allocator.h"

namespace trainer {

std::vector<uint8_t> Backend::make_collective_id() { throw UsageError(collectives_unavailable()); }

std::unique_ptr<DeviceCollective> Backend::join_collective(const std::vector<uint8_t>&, int, int) {
  throw UsageError(collectives_unavailable());
}

void Backend::convert_filter_krsc(void*, DType, const float*, const LowFilterLayout&) {
  throw InternalError(name() + " keeps no filter in (K, R, S, C) for its kernels");
}

void Backend::wait_for(Backend& other) {
  if (&other != this) other.synchronize();
}

void Backend::copy_from(Backend& from, void* dst, const void* src, size_t bytes) {
  if (!host_memory() || !from.host_memory())
    throw UsageError("cannot copy a stage's tensor from " + from.description() + " to " + description() +
                     ": pipeline stages run all on the CPU or all on GPUs");
  if (bytes) std::memcpy(dst, src, bytes);
}

size_t Backend::landing_bytes(const UploadPiece* pieces, int n, size_t* offsets) {
  size_t bytes = 0;
  for (int i = 0; i < n; ++i) {
    if (offsets) offsets[i] = bytes;
    bytes += align_up(pieces[i].bytes, 16);
  }
  return bytes;
}

void Backend::upload_inputs(const UploadPiece* pieces, int n, void*) {
  for (int i = 0; i < n; ++i) copy_to_device(pieces[i].dst, pieces[i].src, pieces[i].bytes);
}

}  // namespace trainer
