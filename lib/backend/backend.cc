// The Backend contract's defaults that need more than a line: device collectives, which only a
// backend with a collective library (NCCL on the CUDA backend) overrides, and the copies between
// the backends of pipeline stages, which a backend of host memory does with memcpy.
#include "lib/backend/backend.h"

#include <cstring>

#include "lib/core/error.h"

namespace trainer {

std::vector<uint8_t> Backend::make_collective_id() { throw UsageError(collectives_unavailable()); }

std::unique_ptr<DeviceCollective> Backend::join_collective(const std::vector<uint8_t>&, int, int) {
  throw UsageError(collectives_unavailable());
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

}  // namespace trainer
