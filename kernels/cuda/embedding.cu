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

// One thread per output element in y's order (l fastest channels-first, else d): the writes of a
// warp are contiguous.
__global__ void embedding_forward_kernel(EmbeddingGeometry g, float last_f, const float* x, const float* w,
                                         float* y, EmbeddingReport* report) {
  const int64_t n = g.batch * g.dim * g.length;
  const uint32_t last = uint32_t(g.vocab - 1);
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const int64_t b = i / (g.length * g.dim);
    const int64_t l = g.channels_first ? i % g.length : (i / g.dim) % g.length;
    const int64_t d = g.channels_first ? (i / g.length) % g.dim : i % g.dim;
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

// dy of sorted position p for column d: dy[b, d, l] (or dy[b, l, d]) with p = b*L + l.
__device__ __forceinline__ float dy_at(const EmbeddingGeometry& g, const float* dy, uint32_t p, int64_t d) {
  if (!g.channels_first) return dy[int64_t(p) * g.dim + d];
  const int64_t b = int64_t(p) / g.length, l = int64_t(p) - b * g.length;
  return dy[(b * g.dim + d) * g.length + l];
}

constexpr int kWarp = 32;
constexpr uint32_t kNoKey = 0xffffffffu;  // past the end: above every row (V - 1 < 2^32 - 1)
constexpr unsigned kAll = 0xffffffffu;
// Columns a warp sums (blockIdx.y picks the tile): with every column in one warp, GPT-2's 256
// chunks of 768 columns kept 256 warps busy and took 465 + 247 us a step on an H200.
constexpr int64_t kColumnTile = 32;

// Step 3: a warp per chunk of 32 sorted positions, lane i at position 32 k + i. For each column
// d, an inclusive segmented scan over the lanes (segments: runs of one key; a fixed tree of
// shuffles) leaves each run's sum in its last lane, which writes it: to dW when the run is the
// whole id, else to tail (the run goes on into the next chunk) or head (it came from the
// previous one). Every load of the chunk is issued at once, instead of one thread walking the
// chunk's positions one dependent load after another.
__global__ void embedding_chunk_kernel(EmbeddingGeometry g, int64_t chunks, const uint32_t* keys,
                                       const uint32_t* pos, const float* dy, float* dw, float* head,
                                       float* tail, bool accumulate) {
  const int64_t n = g.positions();
  const int lane = int(threadIdx.x % kWarp);
  const int64_t k = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  if (k >= chunks) return;  // whole warps: chunks are per warp
  const int64_t lo = k * kWarp, p = lo + lane, hi = lo + kWarp < n ? lo + kWarp : n;
  const bool valid = p < n;
  const uint32_t key = valid ? keys[p] : kNoKey, at = valid ? pos[p] : 0u;
  const uint32_t before = lo > 0 ? keys[lo - 1] : kNoKey, after = hi < n ? keys[hi] : kNoKey;
  const uint32_t up = __shfl_up_sync(kAll, key, 1), down = __shfl_down_sync(kAll, key, 1);
  const bool starts = lane == 0 || up != key;
  const bool ends = lane == kWarp - 1 || down != key;
  // The first lane of this lane's run: the highest starting lane at or below it.
  const unsigned start_mask = __ballot_sync(kAll, starts);
  const int first = 31 - __clz(start_mask & (kAll >> (kWarp - 1 - lane)));
  const bool came = first == 0 && before == key;                 // the run began in an earlier chunk
  const bool goes = lane == kWarp - 1 && valid && after == key;  // it continues past this chunk
  const int64_t d0 = int64_t(blockIdx.y) * kColumnTile,
                d1 = d0 + kColumnTile < g.dim ? d0 + kColumnTile : g.dim;
  for (int64_t d = d0; d < d1; ++d) {
    float v = valid ? dy_at(g, dy, at, d) : 0.f;
    bool seg = starts;
    for (int off = 1; off < kWarp; off <<= 1) {
      const float v_up = __shfl_up_sync(kAll, v, off);
      const bool seg_up = __shfl_up_sync(kAll, seg, off);
      if (lane >= off && !seg) {
        v += v_up;
        seg = seg_up;
      }
    }
    if (!valid || !ends) continue;
    if (goes)
      tail[k * g.dim + d] = v;
    else if (came)
      head[k * g.dim + d] = v;
    else
      dw[int64_t(key) * g.dim + d] = accumulate ? dw[int64_t(key) * g.dim + d] + v : v;
  }
}

// Step 3 for rows (B, L, D) (channels last): a warp per chunk of 32 sorted positions and tile of
// 32 * kVec columns, each lane kVec adjacent columns (a float4 load when kVec is 4). Lane i holds
// the chunk's i-th key and position; the warp walks the positions in order, broadcasting them by
// shuffle, and adds each row to its lanes' sums, which it writes where a run of one key ends: to
// dW, tail or head as embedding_chunk_kernel does. The loads of kBatch positions are issued before
// any is added, so a warp waits on one round trip a batch, not a position. Rows are read whole and
// coalesced, where the channels-first kernel needs a shuffle tree per column (GPT-2's 8,192
// positions x 768 columns: 234 us on an H200 with that kernel).
template <int kVec>
__global__ void embedding_rows_kernel(EmbeddingGeometry g, int64_t chunks, const uint32_t* keys,
                                      const uint32_t* pos, const float* dy, float* dw, float* head,
                                      float* tail, bool accumulate) {
  constexpr int kBatch = 8;
  const int64_t n = g.positions();
  const int lane = int(threadIdx.x % kWarp);
  const int64_t k = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  if (k >= chunks) return;  // whole warps: chunks are per warp
  const int64_t lo = k * kWarp, hi = lo + kWarp < n ? lo + kWarp : n;
  const int count = int(hi - lo);
  const uint32_t my_key = lane < count ? keys[lo + lane] : kNoKey,
                 my_pos = lane < count ? pos[lo + lane] : 0u;
  const uint32_t before = lo > 0 ? keys[lo - 1] : kNoKey, after = hi < n ? keys[hi] : kNoKey;
  const int64_t d = (int64_t(blockIdx.y) * kWarp + lane) * kVec;
  const bool active = d < g.dim;  // lanes past the last column still shuffle
  float sum[kVec] = {};
  uint32_t run_key = __shfl_sync(kAll, my_key, 0);
  bool came = before == run_key;  // the current run began in an earlier chunk
  for (int j0 = 0; j0 < count; j0 += kBatch) {
    float v[kBatch][kVec];
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const uint32_t p = __shfl_sync(kAll, my_pos, (j0 + u) % kWarp);
      const float* row = dy + int64_t(p) * g.dim + d;
      if (active && j0 + u < count) {
        if constexpr (kVec == 4) {
          const float4 r = __ldg(reinterpret_cast<const float4*>(row));
          v[u][0] = r.x;
          v[u][1] = r.y;
          v[u][2] = r.z;
          v[u][3] = r.w;
        } else {
#pragma unroll
          for (int c = 0; c < kVec; ++c) v[u][c] = __ldg(row + c);
        }
      } else {
#pragma unroll
        for (int c = 0; c < kVec; ++c) v[u][c] = 0.f;
      }
    }
#pragma unroll
    for (int u = 0; u < kBatch; ++u) {
      const int j = j0 + u;
      const uint32_t next = __shfl_sync(kAll, my_key, (j + 1) % kWarp);
      if (j >= count) continue;  // uniform over the warp
#pragma unroll
      for (int c = 0; c < kVec; ++c) sum[c] += v[u][c];
      const bool last_in_chunk = j + 1 == count;
      if (!last_in_chunk && next == run_key) continue;
      // The run of run_key ends at j (in this chunk).
      const bool goes = last_in_chunk && after == run_key;
      if (active) {
        float* out = goes   ? tail + k * g.dim + d
                     : came ? head + k * g.dim + d
                            : dw + int64_t(run_key) * g.dim + d;
        const bool add = !goes && !came && accumulate;
#pragma unroll
        for (int c = 0; c < kVec; ++c) out[c] = add ? out[c] + sum[c] : sum[c];
      }
#pragma unroll
      for (int c = 0; c < kVec; ++c) sum[c] = 0.f;
      run_key = next;
      came = false;
    }
  }
}

// The first sorted position of `key` at or after 0 and before `end` (keys[end - 1] == key).
__device__ int64_t first_of(const uint32_t* keys, int64_t end, uint32_t key) {
  int64_t lo = 0, hi = end - 1;  // keys[hi] == key
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (keys[mid] < key)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

// Step 4: a warp per chunk k where an id that began in an earlier chunk ends. Its first chunk j
// comes from a binary search of the sorted keys; the warp adds the tails of chunks j .. k-1 in a
// fixed tree (lane m takes chunks j+m, j+m+32, ... in order, then a butterfly of shuffles) and
// the head of chunk k, and writes the id's dW row.
__global__ void embedding_join_kernel(EmbeddingGeometry g, int64_t chunks, const uint32_t* keys, float* dw,
                                      const float* head, const float* tail, bool accumulate) {
  const int64_t n = g.positions();
  const int lane = int(threadIdx.x % kWarp);
  const int64_t k = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
  if (k >= chunks || k == 0) return;
  const int64_t lo = k * kWarp, hi = lo + kWarp < n ? lo + kWarp : n;
  const uint32_t key = keys[lo];
  if (keys[lo - 1] != key) return;                               // starts here: not a join
  if (keys[hi - 1] == key && hi < n && keys[hi] == key) return;  // goes on: joined later
  const int64_t j = first_of(keys, lo, key) / kWarp;             // the chunk where this id starts
  const int64_t d0 = int64_t(blockIdx.y) * kColumnTile,
                d1 = d0 + kColumnTile < g.dim ? d0 + kColumnTile : g.dim;
  for (int64_t d = d0; d < d1; ++d) {
    float sum = 0.f;
    for (int64_t m = j + lane; m < k; m += kWarp) sum += tail[m * g.dim + d];
    for (int off = kWarp / 2; off > 0; off >>= 1) sum += __shfl_xor_sync(kAll, sum, off);
    if (lane == 0) {
      const float v = sum + head[k * g.dim + d];
      dw[int64_t(key) * g.dim + d] = accumulate ? dw[int64_t(key) * g.dim + d] + v : v;
    }
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
  chunk_ = kWarp;
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

void EmbeddingBackward::run(const float* x, const float* dy, float* dw, bool accumulate,
                            cudaStream_t stream) {
  const int64_t n = g_.positions();
  if (n <= 0 || g_.dim <= 0) return;
  if (!accumulate) CUDA_CHECK(cudaMemsetAsync(dw, 0, size_t(g_.vocab * g_.dim) * sizeof(float), stream));
  embedding_keys_kernel<<<grid_for(n), kThreads, 0, stream>>>(n, float(g_.vocab - 1), uint32_t(g_.vocab - 1),
                                                              x, keys_, pos_);
  CUDA_CHECK_LAUNCH();
  size_t sort_bytes = sort_bytes_;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_scratch_, sort_bytes, keys_, sorted_keys_, pos_,
                                             sorted_pos_, int(n), 0, key_bits_, stream));
  // A warp per chunk and tile of columns; the kernels are not grid-stride loops, so no cap.
  const unsigned blocks = unsigned((chunks_ * kWarp + kThreads - 1) / kThreads);
  const dim3 grid(blocks, unsigned((g_.dim + kColumnTile - 1) / kColumnTile));
  if (g_.channels_first) {
    embedding_chunk_kernel<<<grid, kThreads, 0, stream>>>(g_, chunks_, sorted_keys_, sorted_pos_, dy, dw,
                                                          head_, tail_, accumulate);
  } else if (g_.dim % 4 == 0 && reinterpret_cast<uintptr_t>(dy) % 16 == 0) {
    const dim3 rows(blocks, unsigned((g_.dim + 4 * kWarp - 1) / (4 * kWarp)));
    embedding_rows_kernel<4><<<rows, kThreads, 0, stream>>>(g_, chunks_, sorted_keys_, sorted_pos_, dy, dw,
                                                            head_, tail_, accumulate);
  } else {
    const dim3 rows(blocks, unsigned((g_.dim + kWarp - 1) / kWarp));
    embedding_rows_kernel<1><<<rows, kThreads, 0, stream>>>(g_, chunks_, sorted_keys_, sorted_pos_, dy, dw,
                                                            head_, tail_, accumulate);
  }
  CUDA_CHECK_LAUNCH();
  embedding_join_kernel<<<grid, kThreads, 0, stream>>>(g_, chunks_, sorted_keys_, dw, head_, tail_,
                                                       accumulate);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
