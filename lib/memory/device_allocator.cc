// CappedDeviceAllocator: chunks from a DeviceHeap, first-fit blocks, a hard cap (see the header).
#include "lib/memory/device_allocator.h"

#include <algorithm>

#include "lib/core/error.h"

namespace trainer {

namespace {
std::string cap_text(size_t cap) { return cap ? format_bytes(cap) + " (--mem-limit)" : "none"; }
}  // namespace

CappedDeviceAllocator::CappedDeviceAllocator(DeviceHeap& heap, size_t cap_bytes, bool growth)
    : heap_(heap), cap_(cap_bytes), growth_(growth) {}

CappedDeviceAllocator::~CappedDeviceAllocator() {
  for (auto& kv : chunks_) heap_.raw_free(kv.first);
}

size_t CappedDeviceAllocator::bytes_in_use() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_use_;
}
size_t CappedDeviceAllocator::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}
size_t CappedDeviceAllocator::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_;
}
size_t CappedDeviceAllocator::peak_reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_reserved_;
}
size_t CappedDeviceAllocator::chunk_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return chunks_.size();
}

void CappedDeviceAllocator::fail(const std::string& what, size_t n, const std::string& reason) const {
  std::string msg = "out of memory on " + heap_.name() + " allocating " + what + ": requested " +
                    format_bytes(n) + ", in use " + format_bytes(in_use_) + ", reserved " +
                    format_bytes(reserved_) + ", cap " + cap_text(cap_);
  if (!reason.empty()) msg += "; " + reason;
  throw OutOfMemoryError(msg);
}

void* CappedDeviceAllocator::allocate(size_t bytes, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t n = align_up(bytes == 0 ? 1 : bytes);
  if (cap_ && in_use_ + n > cap_) fail(what, n, "the cap would be exceeded");
  void* p = take_free_block(n);
  if (!p) p = take_new_chunk(n, what);
  in_use_ += n;
  peak_ = std::max(peak_, in_use_);
  return p;
}

// First fit over free blocks, in address order.
void* CappedDeviceAllocator::take_free_block(size_t n) {
  for (auto it = blocks_.begin(); it != blocks_.end(); ++it) {
    if (it->second.free && it->second.size >= n) {
      split(it, n);
      it->second.free = false;
      return it->first;
    }
  }
  return nullptr;
}

// Cuts block `it` to n bytes; the rest becomes a free block of the same chunk.
void CappedDeviceAllocator::split(std::map<char*, Block>::iterator it, size_t n) {
  Block& b = it->second;
  if (b.size == n) return;
  Block rest{b.size - n, b.chunk, true};
  b.size = n;
  blocks_.emplace(it->first + n, rest);
}

void* CappedDeviceAllocator::take_new_chunk(size_t n, const std::string& what) {
  if (cap_ && reserved_ + n > cap_) release_cached_locked();
  if (cap_ && reserved_ + n > cap_)
    fail(what, n, "free blocks are too small or scattered to hold it within the cap");
  size_t want = n;
  if (growth_) want = std::max(align_up(n, kFirstGrowthChunk), next_chunk_);
  if (cap_) want = std::min(want, cap_ - reserved_);  // >= n, checked above
  void* base = heap_.raw_alloc(want);
  if (!base && want > n) {  // the device may still fit the request itself
    want = n;
    base = heap_.raw_alloc(want);
  }
  if (!base && release_cached_locked() > 0) base = heap_.raw_alloc(want);
  if (!base) {
    std::string d = heap_.detail();
    fail(what, n, "the device itself is out of memory" + (d.empty() ? "" : " (" + d + ")"));
  }
  if (growth_) next_chunk_ = std::max(next_chunk_, want) * 2;
  char* c = static_cast<char*>(base);
  chunks_[c] = Chunk{want};
  reserved_ += want;
  peak_reserved_ = std::max(peak_reserved_, reserved_);
  auto it = blocks_.emplace(c, Block{want, c, false}).first;
  split(it, n);
  return c;
}

void CappedDeviceAllocator::deallocate(void* p) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = blocks_.find(static_cast<char*>(p));
  if (it == blocks_.end() || it->second.free) return;
  it->second.free = true;
  in_use_ -= it->second.size;
  // Coalesce with the next and the previous block when free and in the same chunk.
  auto next = std::next(it);
  if (next != blocks_.end() && next->second.free && next->second.chunk == it->second.chunk) {
    it->second.size += next->second.size;
    blocks_.erase(next);
  }
  if (it != blocks_.begin()) {
    auto prev = std::prev(it);
    if (prev->second.free && prev->second.chunk == it->second.chunk) {
      prev->second.size += it->second.size;
      blocks_.erase(it);
    }
  }
}

size_t CappedDeviceAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mu_);
  return release_cached_locked();
}

// A chunk holds nothing when its first block is free and spans the whole chunk.
size_t CappedDeviceAllocator::release_cached_locked() {
  size_t released = 0;
  for (auto c = chunks_.begin(); c != chunks_.end();) {
    auto b = blocks_.find(c->first);
    if (b != blocks_.end() && b->second.free && b->second.size == c->second.size) {
      blocks_.erase(b);
      heap_.raw_free(c->first);
      reserved_ -= c->second.size;
      released += c->second.size;
      c = chunks_.erase(c);
    } else {
      ++c;
    }
  }
  return released;
}

}  // namespace trainer
