// HostAllocator: aligned host memory with accounting and an optional cap (CPU backend's memory).
#pragma once

#include <mutex>
#include <unordered_map>

#include "lib/memory/allocator.h"

namespace trainer {

class HostAllocator : public Allocator {
 public:
  explicit HostAllocator(size_t cap_bytes = 0) : cap_(cap_bytes) {}
  ~HostAllocator() override;
  void* allocate(size_t bytes, const std::string& what) override;
  void deallocate(void* p) override;
  size_t bytes_in_use() const override { return in_use_; }
  size_t peak_bytes() const override { return peak_; }
  size_t cap_bytes() const override { return cap_; }

 private:
  size_t cap_, in_use_ = 0, peak_ = 0;
  std::unordered_map<void*, size_t> sizes_;
  std::mutex mu_;
};

}  // namespace trainer
