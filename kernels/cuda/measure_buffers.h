// MeasureBuffers: device buffers for measuring algorithms at plan time (cuDNN's Find calls, the
// direct convolutions' timing), from the backend's allocator so that --mem-limit holds, and
// freed on every path.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "lib/memory/allocator.h"

namespace trainer::cuda {

class MeasureBuffers {
 public:
  explicit MeasureBuffers(Allocator& alloc) : a_(alloc) {}
  MeasureBuffers(const MeasureBuffers&) = delete;
  MeasureBuffers& operator=(const MeasureBuffers&) = delete;
  ~MeasureBuffers() {
    for (void* q : p_) a_.deallocate(q);
  }
  // `what` names the buffer in an out-of-memory error.
  void* take(size_t bytes, const std::string& what) {
    p_.push_back(a_.allocate(std::max<size_t>(bytes, kArenaAlign), what));
    return p_.back();
  }

 private:
  Allocator& a_;
  std::vector<void*> p_;
};

}  // namespace trainer::cuda
