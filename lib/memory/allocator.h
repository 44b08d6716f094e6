// Allocator: every byte a backend hands out goes through one of these, so a cap (--mem-limit)
// can be enforced and usage reported. Allocations happen while planning, never inside a step.
#pragma once

#include <cstddef>
#include <string>

namespace trainer {

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Throws OutOfMemoryError naming `what`, the bytes requested, in use and the cap.
  virtual void* allocate(size_t bytes, const std::string& what) = 0;
  virtual void deallocate(void* p) = 0;
  virtual size_t bytes_in_use() const = 0;
  virtual size_t peak_bytes() const = 0;
  virtual size_t cap_bytes() const = 0;  // 0: no cap
};

// Rounds up to the alignment every arena slice gets (covers AVX-512 and 128-byte GPU lines).
constexpr size_t kArenaAlign = 256;
inline size_t align_up(size_t n, size_t a = kArenaAlign) { return (n + a - 1) / a * a; }

// Formats a byte count for users: "1.50 MiB".
std::string format_bytes(size_t bytes);

}  // namespace trainer
