// StagingRing: pinned ring buffer for asynchronous host-to-device copies (see the header).
#include "kernels/cuda/staging_ring.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "datasets/row_workers.h"
#include "kernels/cuda/cuda_check.h"
#include "lib/core/error.h"
#include "lib/core/usable_cores.h"
#include "lib/memory/allocator.h"

namespace trainer::cuda {

namespace {
// Copies from this size on are split over the helpers (waking them costs ~50 us: a small batch
// goes faster on one thread). From 8 MB down to 1 MB: cifar10_cnn's 3 MB batch of 256 rows
// copied on one thread took longer than its bf16 step on the GPU, which then idled 130-270 us a
// step (H200, 16 host cores: 2,028 -> 3,204 steps/s; at 512 rows 1,498 -> 2,176).
constexpr size_t kParallelCopyBytes = size_t(1) << 20;
}  // namespace

StagingRing::StagingRing(cudaStream_t stream, size_t bytes)
    : stream_(stream),
      bytes_(bytes),
      copiers_(std::make_unique<RowWorkers>(std::clamp(usable_cores() / 2, 1, 8))) {
  CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_), bytes_, cudaHostAllocDefault));
  try {
    for (int i = 0; i < kEvents; ++i) {
      cudaEvent_t e;
      CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      free_events_.push_back(e);
    }
  } catch (...) {
    for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
    cudaFreeHost(host_);
    throw;
  }
}

StagingRing::~StagingRing() {
  // The copies read the ring: let them finish before it goes (errors cannot be thrown here).
  for (auto& f : in_flight_) {
    cudaEventSynchronize(f.done);
    free_events_.push_back(f.done);
  }
  for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
  cudaFreeHost(host_);
}

void StagingRing::fill(size_t at, const void* src, size_t bytes) {
  char* dst = host_ + at;
  const char* from = static_cast<const char*>(src);
  if (bytes < kParallelCopyBytes || copiers_->threads() == 1) {
    std::memcpy(dst, from, bytes);
    return;
  }
  copiers_->run(int64_t(bytes), [dst, from](int64_t begin, int64_t end) {
    std::memcpy(dst + begin, from + begin, size_t(end - begin));
  });
}

void StagingRing::grow(size_t bytes) {
  if (bytes <= bytes_) return;
  char* bigger = nullptr;
  CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&bigger), bytes, cudaHostAllocDefault));
  while (!in_flight_.empty()) retire_oldest();  // nothing reads the old ring any more
  cudaFreeHost(host_);
  host_ = bigger;
  bytes_ = bytes;
  head_ = 0;
}

void StagingRing::retire_oldest() {
  InFlight f = in_flight_.front();
  in_flight_.pop_front();
  free_events_.push_back(f.done);
  CUDA_CHECK(cudaEventSynchronize(f.done));
}

void StagingRing::retire_completed() {
  while (!in_flight_.empty()) {
    const cudaError_t e = cudaEventQuery(in_flight_.front().done);
    if (e == cudaErrorNotReady) return;
    CUDA_CHECK(e);
    free_events_.push_back(in_flight_.front().done);
    in_flight_.pop_front();
  }
}

size_t StagingRing::reserve(size_t bytes) {
  retire_completed();
  size_t begin = align_up(head_);
  if (begin + bytes > bytes_) begin = 0;  // wrap
  const size_t end = begin + bytes;
  auto overlaps = [&] {
    for (const auto& f : in_flight_)
      if (f.begin < end && begin < f.end) return true;
    return false;
  };
  // Retiring the oldest first frees regions in the order they were taken (on two streams the
  // oldest copy may not be the first to finish: then this waits a little longer than it must).
  while (!in_flight_.empty() && (overlaps() || free_events_.empty())) retire_oldest();
  return begin;
}

void StagingRing::queue(void* dst, size_t begin, size_t bytes, cudaStream_t stream) {
  CUDA_CHECK(cudaMemcpyAsync(dst, host_ + begin, bytes, cudaMemcpyHostToDevice, stream));
  cudaEvent_t done = free_events_.back();
  free_events_.pop_back();
  in_flight_.push_back(InFlight{begin, begin + bytes, done});
  CUDA_CHECK(cudaEventRecord(done, stream));
  head_ = begin + bytes;
}

void StagingRing::copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (!fits(bytes)) {
    // Too large to stage: a plain copy that has finished reading src when it returns.
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    CUDA_CHECK(cudaStreamSynchronize(stream_));
    return;
  }
  const size_t begin = reserve(bytes);
  fill(begin, src, bytes);
  queue(dst, begin, bytes, stream_);
}

void StagingRing::copy_packed(void* dst, const Backend::UploadPiece* pieces, const size_t* offsets, int n,
                              size_t total, cudaStream_t stream) {
  if (total == 0) return;
  if (!fits(total))
    throw InternalError("a packed upload of " + std::to_string(total) +
                        " bytes does not fit the staging ring");
  const size_t begin = reserve(total);
  for (int i = 0; i < n; ++i)
    if (pieces[i].bytes) fill(begin + offsets[i], pieces[i].src, pieces[i].bytes);
  queue(dst, begin, total, stream);
}

}  // namespace trainer::cuda
