// CappedDeviceAllocator on a fake heap (host memory, optional device capacity): the cap and its
// message, growth in chunks, reuse after free, accounting, and a device that runs out. No GPU.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <set>
#include <vector>

#include "lib/core/error.h"
#include "lib/memory/device_allocator.h"

using namespace trainer;

namespace {

constexpr size_t MiB = size_t(1) << 20;

// A heap of host memory that can pretend to be a device of `capacity` bytes (0: unlimited).
class FakeHeap : public DeviceHeap {
 public:
  explicit FakeHeap(size_t capacity = 0) : capacity_(capacity) {}
  ~FakeHeap() override { REQUIRE(live_.empty()); }
  void* raw_alloc(size_t bytes) override {
    ++calls;
    if (capacity_ && used_ + bytes > capacity_) return nullptr;
    void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!p) return nullptr;
    live_[p] = bytes;
    used_ += bytes;
    sizes.push_back(bytes);
    return p;
  }
  void raw_free(void* p) override {
    auto it = live_.find(p);
    REQUIRE(it != live_.end());
    used_ -= it->second;
    live_.erase(it);
    std::free(p);
  }
  std::string name() const override { return "fake:0"; }
  std::string detail() const override { return "fake device full"; }
  size_t used() const { return used_; }
  int calls = 0;
  std::vector<size_t> sizes;  // every chunk obtained, in order

 private:
  size_t capacity_, used_ = 0;
  std::map<void*, size_t> live_;
};

std::string oom_message(CappedDeviceAllocator& a, size_t bytes, const std::string& what) {
  try {
    a.allocate(bytes, what);
  } catch (const OutOfMemoryError& e) {
    return e.what();
  }
  FAIL("expected OutOfMemoryError");
  return "";
}

}  // namespace

TEST_CASE("device allocator enforces the cap and says what did not fit", "[memory]") {
  FakeHeap heap;
  CappedDeviceAllocator a(heap, 10 * MiB, false);
  void* p = a.allocate(6 * MiB, "parameters");
  REQUIRE(p != nullptr);
  const std::string msg = oom_message(a, 5 * MiB, "activations for batch size 64");
  CHECK_THAT(msg, Catch::Contains("activations for batch size 64"));
  CHECK_THAT(msg, Catch::Contains("requested 5.00 MiB"));
  CHECK_THAT(msg, Catch::Contains("in use 6.00 MiB"));
  CHECK_THAT(msg, Catch::Contains("cap 10.00 MiB"));
  CHECK_THAT(msg, Catch::Contains("fake:0"));
  CHECK(a.bytes_in_use() == 6 * MiB);  // a failed request changes nothing
  CHECK(heap.used() <= 10 * MiB);
  void* q = a.allocate(4 * MiB, "fits exactly");
  CHECK(a.bytes_in_use() == 10 * MiB);
  a.deallocate(q);
  a.deallocate(p);
}

TEST_CASE("device allocator without growth takes one chunk per request", "[memory]") {
  FakeHeap heap;
  CappedDeviceAllocator a(heap, 0, false);
  void* p = a.allocate(3 * MiB + 1, "a");
  void* q = a.allocate(100, "b");
  CHECK(a.chunk_count() == 2);
  CHECK(heap.sizes == std::vector<size_t>{3 * MiB + 256, 256});
  CHECK(a.reserved_bytes() == a.bytes_in_use());
  a.deallocate(p);
  a.deallocate(q);
}

TEST_CASE("device allocator grows in doubling chunks and stays under the cap", "[memory]") {
  FakeHeap heap;
  const size_t cap = 13 * MiB;
  CappedDeviceAllocator a(heap, cap, true);
  std::vector<void*> ps;
  // 1 MiB at a time until the cap: chunks of 2, 4, then the 7 MiB that remain under the cap.
  for (int i = 0; i < 13; ++i) {
    ps.push_back(a.allocate(1 * MiB, "block " + std::to_string(i)));
    CHECK(a.reserved_bytes() <= cap);
    CHECK(heap.used() <= cap);
  }
  CHECK(heap.sizes == std::vector<size_t>{2 * MiB, 4 * MiB, 7 * MiB});
  CHECK(a.chunk_count() == 3);
  CHECK(a.bytes_in_use() == 13 * MiB);
  CHECK(a.reserved_bytes() == 13 * MiB);
  const std::string msg = oom_message(a, 1, "one more");
  CHECK_THAT(msg, Catch::Contains("one more"));
  CHECK_THAT(msg, Catch::Contains("cap 13.00 MiB"));
  for (void* p : ps) a.deallocate(p);
  CHECK(a.bytes_in_use() == 0);
  CHECK(a.reserved_bytes() == 13 * MiB);  // cached, not returned
  CHECK(a.release_cached() == 13 * MiB);
  CHECK(a.reserved_bytes() == 0);
}

TEST_CASE("device allocator growth sub-allocates small requests from one chunk", "[memory]") {
  FakeHeap heap;
  CappedDeviceAllocator a(heap, 0, true);
  std::set<void*> ps;
  for (int i = 0; i < 100; ++i) ps.insert(a.allocate(1000, "small"));
  CHECK(ps.size() == 100);
  CHECK(heap.calls == 1);
  CHECK(a.reserved_bytes() == CappedDeviceAllocator::kFirstGrowthChunk);
  CHECK(a.bytes_in_use() == 100 * 1024);  // 1000 rounds up to 1024
  for (void* p : ps) {
    CHECK(reinterpret_cast<uintptr_t>(p) % kArenaAlign == 0);
    a.deallocate(p);
  }
  // A request larger than the next chunk gets a chunk of its own size, rounded to 2 MiB.
  void* big = a.allocate(9 * MiB, "big");
  CHECK(heap.sizes.back() >= 9 * MiB);
  CHECK(heap.sizes.back() % (2 * MiB) == 0);
  a.deallocate(big);
}

TEST_CASE("device allocator reuses freed memory", "[memory]") {
  FakeHeap heap;
  for (bool growth : {false, true}) {
    CappedDeviceAllocator a(heap, 8 * MiB, growth);
    void* p = a.allocate(4 * MiB, "first");
    a.deallocate(p);
    const int calls = heap.calls;
    void* q = a.allocate(4 * MiB, "second");
    CHECK(q == p);
    CHECK(heap.calls == calls);
    // Two halves fit in the freed block after coalescing.
    a.deallocate(q);
    void* r1 = a.allocate(2 * MiB, "half 1");
    void* r2 = a.allocate(2 * MiB, "half 2");
    CHECK(heap.calls == calls);
    a.deallocate(r1);
    a.deallocate(r2);
    void* whole = a.allocate(4 * MiB, "whole again");  // needs the halves coalesced
    CHECK(whole == p);
    CHECK(heap.calls == calls);
    a.deallocate(whole);
  }
}

TEST_CASE("device allocator accounts in-use and peak bytes", "[memory]") {
  FakeHeap heap;
  CappedDeviceAllocator a(heap, 0, false);
  CHECK(a.cap_bytes() == 0);
  void* p = a.allocate(1000, "a");  // 1024 after alignment
  void* q = a.allocate(3000, "b");  // 3072
  CHECK(a.bytes_in_use() == 4096);
  CHECK(a.peak_bytes() == 4096);
  a.deallocate(p);
  CHECK(a.bytes_in_use() == 3072);
  CHECK(a.peak_bytes() == 4096);
  a.deallocate(p);        // double free: ignored
  a.deallocate(nullptr);  // ignored
  CHECK(a.bytes_in_use() == 3072);
  void* r = a.allocate(0, "empty");  // still a distinct, aligned block
  CHECK(r != nullptr);
  CHECK(a.bytes_in_use() == 3072 + 256);
  a.deallocate(q);
  a.deallocate(r);
  CHECK(a.bytes_in_use() == 0);
  CHECK(a.peak_bytes() == 4096);
}

TEST_CASE("device allocator reports a device that is itself out of memory", "[memory]") {
  FakeHeap heap(5 * MiB);  // the device is smaller than the cap
  CappedDeviceAllocator a(heap, 64 * MiB, false);
  void* p = a.allocate(4 * MiB, "parameters");
  const std::string msg = oom_message(a, 2 * MiB, "activations");
  CHECK_THAT(msg, Catch::Contains("activations"));
  CHECK_THAT(msg, Catch::Contains("device itself is out of memory"));
  CHECK_THAT(msg, Catch::Contains("fake device full"));
  CHECK_THAT(msg, Catch::Contains("requested 2.00 MiB"));
  CHECK_THAT(msg, Catch::Contains("in use 4.00 MiB"));
  CHECK_THAT(msg, Catch::Contains("cap 64.00 MiB"));
  CHECK(a.bytes_in_use() == 4 * MiB);
  // Cached free chunks are returned to the device before giving up.
  a.deallocate(p);
  void* q = a.allocate(5 * MiB, "after release");
  CHECK(q != nullptr);
  CHECK(a.reserved_bytes() == 5 * MiB);
  a.deallocate(q);
}

TEST_CASE("device allocator in growth mode falls back to the exact size on a full device", "[memory]") {
  FakeHeap heap(3 * MiB);
  CappedDeviceAllocator a(heap, 0, true);
  void* p = a.allocate(1 * MiB, "first");   // 2 MiB chunk
  void* q = a.allocate(1 * MiB, "second");  // same chunk
  void* r = a.allocate(1 * MiB, "third");   // a 4 MiB chunk does not fit; 1 MiB does
  CHECK(heap.sizes == std::vector<size_t>{2 * MiB, 1 * MiB});
  const std::string msg = oom_message(a, 1 * MiB, "fourth");
  CHECK_THAT(msg, Catch::Contains("device itself is out of memory"));
  CHECK_THAT(msg, Catch::Contains("cap none"));
  a.deallocate(p);
  a.deallocate(q);
  a.deallocate(r);
}
