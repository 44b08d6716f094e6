// StagingRing: pinned host memory through which host-to-device copies go asynchronously.
//
// Backend::copy_to_device promises that the host source may be reused as soon as the call
// returns, while the copy itself stays queued on the stream. So the source is first memcpy'd into
// a region of this pinned ring, then cudaMemcpyAsync'd from there, and a pre-created event marks
// when the GPU is done with the region. A new copy takes the bytes after the previous one
// (wrapping to the start); it waits (cudaEventSynchronize) only for older copies still in flight
// that overlap its region, i.e. when the GPU is a whole ring behind. Copies larger than half the
// ring go synchronously (cudaMemcpyAsync + cudaStreamSynchronize). copy_packed gathers several
// host pieces into one region and queues them as one copy, on a stream of the caller's choice
// (the backend's copy stream: Backend::upload_inputs). Copies on two streams may finish out of
// order; a region is reused only after its own copy's event, whatever the stream.
// Everything is allocated in the constructor: pinned memory, the event pool, and the helper
// threads that split a large copy into pinned memory (a batch of 224 x 224 images, 154 MB of
// floats: one thread's memcpy, ~5.5 GB/s on an H200 host, took 28 ms, longer than resnet18's step).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <deque>
#include <memory>
#include <vector>

#include "lib/backend/backend.h"

namespace trainer {
class RowWorkers;  // datasets/row_workers.h
}

namespace trainer::cuda {

class StagingRing {
 public:
  static constexpr size_t kDefaultBytes = size_t(64) << 20;
  static constexpr int kEvents = 256;

  StagingRing(cudaStream_t stream, size_t bytes = kDefaultBytes);
  ~StagingRing();
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

  // Queues dst <- src (bytes) on the stream; src may be reused when this returns.
  void copy_to_device(void* dst, const void* src, size_t bytes);
  // Makes the ring at least `bytes` long (waits for the copies in flight; not during a step).
  void grow(size_t bytes);
  // Whether `bytes` can be staged (at most half the ring).
  bool fits(size_t bytes) const { return bytes <= bytes_ / 2; }
  // Queues one copy of `total` bytes to dst, on `stream`, holding the n pieces' sources at their
  // offsets (the caller's packing: Backend::landing_bytes); the sources may be reused when this
  // returns. total must fit().
  void copy_packed(void* dst, const Backend::UploadPiece* pieces, const size_t* offsets, int n, size_t total,
                   cudaStream_t stream);

 private:
  struct InFlight {
    size_t begin, end;
    cudaEvent_t done;
  };
  void retire_oldest();          // waits for the oldest copy's event
  void retire_completed();       // drops copies that already finished (no wait)
  size_t reserve(size_t bytes);  // a free region of the ring for `bytes`: its offset
  void queue(void* dst, size_t begin, size_t bytes, cudaStream_t stream);  // copy a region, mark it

  // host_ + at = src, bytes, on the copiers when large.
  void fill(size_t at, const void* src, size_t bytes);

  cudaStream_t stream_;
  size_t bytes_;
  std::unique_ptr<RowWorkers> copiers_;
  char* host_ = nullptr;
  size_t head_ = 0;
  std::deque<InFlight> in_flight_;
  std::vector<cudaEvent_t> free_events_;
};

}  // namespace trainer::cuda
