// The Backend contract's defaults that need more than a line: device collectives, which only a
// backend with a collective library (NCCL on the CUDA backend) overrides.
#include "lib/backend/backend.h"

#include "lib/core/error.h"

namespace trainer {

std::vector<uint8_t> Backend::make_collective_id() { throw UsageError(collectives_unavailable()); }

std::unique_ptr<DeviceCollective> Backend::join_collective(const std::vector<uint8_t>&, int, int) {
  throw UsageError(collectives_unavailable());
}

}  // namespace trainer
