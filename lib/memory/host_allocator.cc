#include "lib/memory/host_allocator.h"

#include <cstdio>
#include <cstdlib>

#include "lib/core/error.h"

namespace trainer {

std::string format_bytes(size_t bytes) {
  char buf[64];
  if (bytes < 1024 * 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  else
    std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

HostAllocator::~HostAllocator() {
  for (auto& kv : sizes_) std::free(kv.first);
}

void* HostAllocator::allocate(size_t bytes, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = align_up(bytes == 0 ? 1 : bytes);
  if (cap_ && in_use_ + n > cap_)
    throw OutOfMemoryError("out of memory allocating " + what + ": requested " + format_bytes(n) +
                           ", in use " + format_bytes(in_use_) + ", cap " + format_bytes(cap_));
  void* p = std::aligned_alloc(kArenaAlign, n);
  if (!p) throw OutOfMemoryError("out of host memory allocating " + what + " (" + format_bytes(n) + ")");
  sizes_[p] = n;
  in_use_ += n;
  if (in_use_ > peak_) peak_ = in_use_;
  return p;
}

void HostAllocator::deallocate(void* p) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sizes_.find(p);
  if (it == sizes_.end()) return;
  in_use_ -= it->second;
  sizes_.erase(it);
  std::free(p);
}

}  // namespace trainer
