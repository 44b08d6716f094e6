// StagingRing: pinned host memory through which host-to-device copies go asynchronously.
//
// Backend::copy_to_device promises that the host source may be reused as soon as the call
// returns, while the copy itself stays queued on the stream. So the source is first memcpy'd into
// a region of this pinned ring, then cudaMemcpyAsync'd from there, and a pre-created event marks
// when the GPU is done with the region. A new copy takes the bytes after the previous one
// (wrapping to the start); it waits (cudaEventSynchronize) only for older copies still in flight
// that overlap its region, i.e. when the GPU is a whole ring behind. Copies larger than half the
// ring go synchronously (cudaMemcpyAsync + cudaStreamSynchronize).
// Everything is allocated in the constructor: pinned memory and the event pool.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <deque>
#include <vector>

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

 private:
  struct InFlight {
    size_t begin, end;
    cudaEvent_t done;
  };
  void retire_oldest();     // waits for the oldest copy's event
  void retire_completed();  // drops copies that already finished (no wait)

  cudaStream_t stream_;
  size_t bytes_;
  char* host_ = nullptr;
  size_t head_ = 0;
  std::deque<InFlight> in_flight_;
  std::vector<cudaEvent_t> free_events_;
};

}  // namespace trainer::cuda
