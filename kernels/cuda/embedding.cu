// Embedding gather and its deterministic sort-based gradient (see embedding.cuh).
#include <algorithm>
#include <cmath>
#include <cub/device/device_radix_sort.cuh>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/embedding.cuh"
#include "kernels/cuda/launch.cuh"
#include "lib/core/embedding_formula.h"
#include "lib/memory/allocator.h"

namespace trainer::cuda {
namespace {

// The row of an id (lib/core/embedding_formula.h, as the CPU). last = V - 1 < 2^32,
// last_f = float(V - 1) (rounded on the host).
__device__ __forceinline__ uint32_t token(float v, float last_f, uint32_t last) {
  return uint32_t(embedding_row(v, last_f, int64_t(last)));
}

__device__ __forceinline__ void note_clamped(EmbeddingReport* r, float v) {
  r->example = v;
  __threadfence_system();  // the id before the flag, as the host sees them
  r->clamped = 1u;
}

// One thread per output element, l fastest: the writes of a warp are contiguous.
__global__ void embedding_forward_kernel(EmbeddingGeometry g, float last_f, const float* x, const float* w,
                                         float* y, EmbeddingReport* report) {
  const int64_t n = g.batch * g.dim * g.length;
  const uint32_t last = uint32_t(g.vocab - 1);
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const int64_t l = i % g.length, d = (i / g.length) % g.dim, b = i / (g.length * g.dim);
    const float v = x[b * g.length + l];
    const uint32_t id = token(v, last_f, last);
    y[i] = w[int64_t(id) * g.dim + d];
    if (report && d == 0 && float(id) != v) note_clamped(report, v);
  }
}

__global__ void embedding_keys_kernel(int64_t n, float last_f, uint32_t last, const float* x, uint32_t* keys,
                                      uint32_t* pos) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    keys[i] = token(x[i], last_f, last);
    pos[i] = uint32_t(i);
  }
}

// dy of sorted position p for column d: dy[b, d, l] with p = b*L + l.
__device__ __forceinline__ float dy_at(const EmbeddingGeometry& g, const float* dy, uint32_t p, int64_t d) {
  const int64_t b = int64_t(p) / g.length, l = int64_t(p) - b * g.length;
  return dy[(b * g.dim + d) * g.length + l];
}

// Step 3: one thread per (chunk k, column d), d fastest.
__global__ void embedding_chunk_kernel(EmbeddingGeometry g, int64_t chunk, int64_t chunks,
                                       const uint32_t* keys, const uint32_t* pos, const float* dy, float* dw,
                                       float* head, float* tail) {
  const int64_t n = g.positions(), threads = chunks * g.dim;
  for (int64_t t = global_index(); t < threads; t += grid_stride()) {
    const int64_t d = t % g.dim, k = t / g.dim;
    const int64_t lo = k * chunk, hi = lo + chunk < n ? lo + chunk : n;
    int64_t i = lo;
    while (i < hi) {
      const uint32_t key = keys[i];
      const int64_t start = i;
      float sum = 0.f;
      for (; i < hi && keys[i] == key; ++i) sum += dy_at(g, dy, pos[i], d);
      const bool from_prev = start == lo && lo > 0 && keys[lo - 1] == key;
      const bool into_next = i == hi && hi < n && keys[hi] == key;
      if (into_next)
        tail[k * g.dim + d] = sum;
      else if (from_prev)
        head[k * g.dim + d] = sum;
      else
        dw[int64_t(key) * g.dim + d] = sum;
    }
  }
}

// Step 4: the thread of (chunk k, d) where an id that started in an earlier chunk ends.
__global__ void embedding_join_kernel(EmbeddingGeometry g, int64_t chunk, int64_t chunks,
                                      const uint32_t* keys, float* dw, const float* head, const float* tail) {
  const int64_t n = g.positions(), threads = chunks * g.dim;
  for (int64_t t = global_index(); t < threads; t += grid_stride()) {
    const int64_t d = t % g.dim, k = t / g.dim;
    const int64_t lo = k * chunk, hi = lo + chunk < n ? lo + chunk : n;
    if (k == 0) continue;
    const uint32_t key = keys[lo];
    if (keys[lo - 1] != key) continue;                               // starts here: not a join
    if (keys[hi - 1] == key && hi < n && keys[hi] == key) continue;  // goes on: joined later
    int64_t j = k - 1;                                               // the chunk where this id starts
    while (j > 0 && keys[j * chunk - 1] == key) --j;
    float sum = 0.f;
    for (int64_t m = j; m < k; ++m) sum += tail[m * g.dim + d];
    dw[int64_t(key) * g.dim + d] = sum + head[k * g.dim + d];
  }
}

constexpr size_t slice(size_t bytes) { return (bytes + kArenaAlign - 1) / kArenaAlign * kArenaAlign; }

}  // namespace

void launch_embedding_forward(const EmbeddingGeometry& g, const float* x, const float* w, float* y,
                              EmbeddingReport* report, cudaStream_t stream) {
  const int64_t n = g.batch * g.dim * g.length;
  if (n <= 0) return;
  embedding_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, float(g.vocab - 1), x, w, y, report);
  CUDA_CHECK_LAUNCH();
}

EmbeddingBackward::EmbeddingBackward(const EmbeddingGeometry& g) : g_(g) {
  const int64_t n = g.positions();
  chunk_ = std::max<int64_t>(32, int64_t(std::ceil(std::sqrt(double(n)))));
  chunks_ = (n + chunk_ - 1) / chunk_;
  while (key_bits_ < 32 && (int64_t(1) << key_bits_) < g.vocab) ++key_bits_;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes_, keys_, sorted_keys_, pos_, sorted_pos_,
                                             int(n), 0, key_bits_));
  const size_t ids = slice(size_t(n) * sizeof(uint32_t)),
               runs = slice(size_t(chunks_ * g.dim) * sizeof(float));
  total_bytes_ = 4 * ids + 2 * runs + slice(sort_bytes_);
}

void EmbeddingBackward::bind(void* workspace) {
  const int64_t n = g_.positions();
  const size_t ids = slice(size_t(n) * sizeof(uint32_t)),
               runs = slice(size_t(chunks_ * g_.dim) * sizeof(float));
  char* p = static_cast<char*>(workspace);
  keys_ = reinterpret_cast<uint32_t*>(p);
  pos_ = reinterpret_cast<uint32_t*>(p + ids);
  sorted_keys_ = reinterpret_cast<uint32_t*>(p + 2 * ids);
  sorted_pos_ = reinterpret_cast<uint32_t*>(p + 3 * ids);
  head_ = reinterpret_cast<float*>(p + 4 * ids);
  tail_ = reinterpret_cast<float*>(p + 4 * ids + runs);
  sort_scratch_ = p + 4 * ids + 2 * runs;
}

void EmbeddingBackward::run(const float* x, const float* dy, float* dw, cudaStream_t stream) {
  const int64_t n = g_.positions();
  if (n <= 0 || g_.dim <= 0) return;
  CUDA_CHECK(cudaMemsetAsync(dw, 0, size_t(g_.vocab * g_.dim) * sizeof(float), stream));
  embedding_keys_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, float(g_.vocab - 1), uint32_t(g_.vocab - 1),
                                                              x, keys_, pos_);
  CUDA_CHECK_LAUNCH();
  size_t sort_bytes = sort_bytes_;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_scratch_, sort_bytes, keys_, sorted_keys_, pos_,
                                             sorted_pos_, int(n), 0, key_bits_, stream));
  const int64_t threads = chunks_ * g_.dim;
  embedding_chunk_kernel<<<grid_for(threads), kThreads, 0, stream>>>(g_, chunk_, chunks_, sorted_keys_,
                                                                     sorted_pos_, dy, dw, head_, tail_);
  CUDA_CHECK_LAUNCH();
  embedding_join_kernel<<<grid_for(threads), kThreads, 0, stream>>>(g_, chunk_, chunks_, sorted_keys_, dw,
                                                                    head_, tail_);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
