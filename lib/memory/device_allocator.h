// CappedDeviceAllocator: the device backends' allocator, with a hard cap (--mem-limit) and an
// optional growth mode (--mem-growth). Pure C++: the device is reached through DeviceHeap, so the
// policy is unit-tested on the CPU with a fake heap (tests/test_device_allocator.cc).
//
// Design: a small caching allocator. Memory is obtained from the heap in chunks and handed out as
// 256-byte aligned blocks carved from them (first fit over free blocks in address order; a freed
// block is coalesced with free neighbours of the same chunk and reused, never returned to the heap
// until the cache is released or the allocator dies).
//   growth = false: every request that finds no free block gets a chunk of exactly its size (the
//                   executor makes a handful of large requests before the first step).
//   growth = true:  chunks come in growing sizes: 2 MiB first, doubling each time, never past the
//                   cap; requests are sub-allocated from them.
// Accounting: bytes_in_use (handed out), peak_bytes (max in use), reserved_bytes (obtained from the
// heap). With a cap, both in-use and reserved bytes stay <= cap: before failing, chunks holding
// nothing are returned to the heap and the request is retried.
// Failure: OutOfMemoryError naming what was being allocated, the bytes requested, in use, reserved
// and the cap; when the heap itself refuses, it says that the device itself is out of memory.
#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "lib/memory/allocator.h"

namespace trainer {

// Where device memory comes from (cudaMalloc for the CUDA backend, a fake in tests).
class DeviceHeap {
 public:
  virtual ~DeviceHeap() = default;
  // nullptr when the device cannot provide `bytes` (never throws for that case).
  virtual void* raw_alloc(size_t bytes) = 0;
  virtual void raw_free(void* p) = 0;
  // For messages: "gpu:0".
  virtual std::string name() const { return "device"; }
  // For the device-out-of-memory message: "the device reports 1.20 MiB free of 80.00 GiB".
  virtual std::string detail() const { return ""; }
};

class CappedDeviceAllocator : public Allocator {
 public:
  static constexpr size_t kFirstGrowthChunk = size_t(2) << 20;  // 2 MiB

  // heap must outlive the allocator. cap_bytes = 0: no cap.
  CappedDeviceAllocator(DeviceHeap& heap, size_t cap_bytes, bool growth);
  ~CappedDeviceAllocator() override;  // returns every chunk to the heap
  CappedDeviceAllocator(const CappedDeviceAllocator&) = delete;
  CappedDeviceAllocator& operator=(const CappedDeviceAllocator&) = delete;

  void* allocate(size_t bytes, const std::string& what) override;
  void deallocate(void* p) override;  // unknown pointers and nullptr are ignored
  size_t bytes_in_use() const override;
  size_t peak_bytes() const override;
  size_t cap_bytes() const override { return cap_; }

  bool growth() const { return growth_; }
  size_t reserved_bytes() const;  // obtained from the heap and not yet returned
  size_t peak_reserved_bytes() const;
  size_t chunk_count() const;
  // Returns chunks with nothing handed out to the heap; the number of bytes returned.
  size_t release_cached();

 private:
  struct Block {
    size_t size = 0;
    char* chunk = nullptr;  // base of the chunk the block lies in
    bool free = true;
  };
  struct Chunk {
    size_t size = 0;
  };

  void* take_free_block(size_t n);
  void* take_new_chunk(size_t n, const std::string& what);
  void split(std::map<char*, Block>::iterator it, size_t n);
  size_t release_cached_locked();
  [[noreturn]] void fail(const std::string& what, size_t n, const std::string& reason) const;

  DeviceHeap& heap_;
  const size_t cap_;
  const bool growth_;
  size_t next_chunk_ = kFirstGrowthChunk;
  size_t in_use_ = 0, peak_ = 0, reserved_ = 0, peak_reserved_ = 0;
  std::map<char*, Block> blocks_;  // every block of every chunk, by address
  std::map<char*, Chunk> chunks_;  // by base address
  mutable std::mutex mu_;
};

}  // namespace trainer
