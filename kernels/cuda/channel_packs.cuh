// Channels-last tensors (B, S, C) moved 16 bytes at a time (only included from .cu files).
// A "pack" is kPack<T> consecutive channels of one row: 8 bf16 or fp16 values, 4 f32. Kernels
// over packs need C % kPack<T> == 0 and 16-byte aligned pointers (packs_fit); they do the same
// per-value arithmetic as their one-value-a-thread twins, so element-wise results are the same
// bits. One value a thread moved 2 bytes a load: vgg11_bn_cifar's batchnorm, bias and pooling
// passes ran at 0.9-1.7 TB/s on an H100 (bf16, ncu).
//
// Passes over packs share one tiling: a row's C / n packs are covered by tiles of `width` packs
// (a power of two, at most 32); a block of 256 threads is width packs x (256 / width) row phases
// over the part_len rows of piece blockIdx.y. Each thread keeps one pack of channels (their
// constants loaded once) and walks its rows. pack_reduce_kernel: per-channel sums, each thread
// adding its rows in order, then the phases added in order in double: the same sums on every
// run (no atomics).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/launch.cuh"

namespace trainer::cuda {

template <class T>
constexpr int kPack = int(16 / sizeof(T));

template <class T>
struct alignas(16) Pack {
  T v[kPack<T>];
};
template <class T>
__device__ __forceinline__ Pack<T> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T>*>(p);
}
template <class T>
__device__ __forceinline__ void store_pack(T* p, const Pack<T>& v) {
  *reinterpret_cast<Pack<T>*>(p) = v;
}

// kPack of a runtime dtype.
inline int pack_values(DType t) { return t == DType::f32 ? 4 : 8; }

// Whether a channels-last kernel of element type T over `channels` channels may move packs: whole
// packs a row, and every pointer given (null ones skipped) 16-byte aligned.
template <class T>
bool packs_fit(int64_t channels, std::initializer_list<const void*> pointers) {
  if (channels <= 0 || channels % kPack<T> != 0) return false;
  for (const void* p : pointers)
    if (p && reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}

// The tiles of a pass over packs of n values: `width` packs of a row per block (the largest power
// of two up to 32 that the row's packs fill), `tiles` blocks across a row. From the shape alone,
// so the split a geometry chose at plan time and its launches agree.
struct PackTiles {
  int width = 0;  // 0: the rows do not split into packs
  int64_t tiles = 0;
};
inline PackTiles pack_tiles(int n, int64_t channels) {
  PackTiles p;
  if (channels <= 0 || channels % n != 0) return p;
  const int64_t packs = channels / n;
  p.width = 1;
  while (p.width * 2 <= 32 && p.width * 2 <= packs) p.width *= 2;
  p.tiles = (packs + p.width - 1) / p.width;
  return p;
}

// The split of a channels-last pass over n rows into pieces: about rows_per_thread rows a thread,
// at least about 2 blocks an SM where the rows allow (vgg11_bn_cifar's 2 x 2 layers, 512 channels,
// 1024 rows at batch 256, ran 16 blocks at 16 rows a thread), about 1024 blocks in all at most.
// With packs (tiles.width > 0) a block has 256 / width row phases. Without, the split of the
// one-value-a-thread kernels: 32-channel tiles of 8 row phases, at least scalar_rows rows a thread.
inline RowSplit pack_row_split(int64_t n, int64_t channels, const PackTiles& tiles, int64_t rows_per_thread,
                               int64_t scalar_rows = 16) {
  if (tiles.width == 0) return channels_last_row_split(n, channels, scalar_rows);
  const int64_t phases = 256 / tiles.width;
  const int64_t by_size = (n + phases * rows_per_thread - 1) / (phases * rows_per_thread);
  const int64_t fill = std::min((264 + tiles.tiles - 1) / tiles.tiles, (n + phases - 1) / phases);
  RowSplit s;
  s.parts = std::max<int64_t>(1, std::min(std::max(by_size, fill), std::max<int64_t>(1, 1024 / tiles.tiles)));
  s.part_len = std::max<int64_t>(1, (n + s.parts - 1) / s.parts);
  return s;
}

// A pass over packs as the kernel sees it: block (tile, piece) of 256 threads, thread (x, y) =
// (pack tile * width + x of every row, row phase y) over the part_len rows of its piece.
struct PackRows {
  int64_t rows = 0, channels = 0, part_len = 0;
  int width = 0;
};
struct PackLaunch {
  PackRows rows;
  dim3 grid;
};
// The launch of an element-wise pass over packs of T (about rows_per_thread rows a thread);
// rows.width = 0 where channels are no whole packs.
template <class T>
PackLaunch pack_launch(int64_t rows, int64_t channels, int64_t rows_per_thread) {
  PackLaunch l;
  const PackTiles tiles = pack_tiles(kPack<T>, channels);
  if (tiles.width == 0) return l;
  const RowSplit split = pack_row_split(rows, channels, tiles, rows_per_thread);
  l.rows = PackRows{rows, channels, split.part_len, tiles.width};
  l.grid = dim3(unsigned(tiles.tiles), unsigned(split.parts));
  return l;
}

// This thread's pack (its first channel c0) and rows [row, end) by step.
struct PackCursor {
  int64_t c0, row, end;
  int step;
};
__device__ __forceinline__ PackCursor pack_cursor(const PackRows& r, int n) {
  const int tx = int(threadIdx.x) % r.width, ty = int(threadIdx.x) / r.width;
  PackCursor p;
  p.c0 = (int64_t(blockIdx.x) * r.width + tx) * n;
  const int64_t begin = int64_t(blockIdx.y) * r.part_len;
  p.row = begin + ty;
  p.end = begin + r.part_len < r.rows ? begin + r.part_len : r.rows;
  p.step = 256 / r.width;
  if (p.c0 >= r.channels) p.end = p.row;  // no pack here: no rows
  return p;
}

// Term: kSums sums a value, accumulated a thread in Term::Acc (then in double across threads),
// kAhead rows' loads in flight at once a thread.
// term.channel(c0) loads what the pack at channels [c0, c0 + n) needs (once a thread);
// term.load(e) reads the pack whose first value is element e into a Term::Loaded; term.add(loaded,
// acc) adds its values' terms to acc[s][k]. Sink: sink(c, s, piece, sum).
template <class T, class Term, class Sink>
__global__ void __launch_bounds__(256, 2) pack_reduce_kernel(PackRows r, Term term, Sink sink) {
  constexpr int N = kPack<T>, S = Term::kSums, kAhead = Term::kAhead;
  using Acc = typename Term::Acc;
  __shared__ double shared[256 * S * N];
  const PackCursor p = pack_cursor(r, N);
  Acc acc[S][N];
#pragma unroll
  for (int s = 0; s < S; ++s)
#pragma unroll
    for (int k = 0; k < N; ++k) acc[s][k] = 0;
  if (p.row < p.end) term.channel(p.c0);
  for (int64_t row0 = p.row; row0 < p.end; row0 += int64_t(p.step) * kAhead) {
    typename Term::Loaded v[kAhead];  // the loads first, all in flight at once; then the sums in order
#pragma unroll
    for (int u = 0; u < kAhead; ++u) {
      const int64_t row = row0 + int64_t(u) * p.step;
      if (row < p.end) v[u] = term.load(row * r.channels + p.c0);
    }
#pragma unroll
    for (int u = 0; u < kAhead; ++u)
      if (row0 + int64_t(u) * p.step < p.end) term.add(v[u], acc);
  }
  // shared[((ty * width + tx) * S + s) * N + k]; then each (pack, sum, value) of the tile adds its
  // phases in order.
#pragma unroll
  for (int s = 0; s < S; ++s)
#pragma unroll
    for (int k = 0; k < N; ++k) shared[(int(threadIdx.x) * S + s) * N + k] = double(acc[s][k]);
  __syncthreads();
  const int per_phase = r.width * S * N;
  for (int q = int(threadIdx.x); q < per_phase; q += 256) {
    const int x = q / (S * N), s = (q / N) % S, k = q % N;
    const int64_t c = (int64_t(blockIdx.x) * r.width + x) * N + k;
    if (c >= r.channels) continue;
    double sum = 0;
    for (int y = 0; y < p.step; ++y) sum += shared[((y * r.width + x) * S + s) * N + k];
    sink(c, s, int64_t(blockIdx.y), sum);
  }
}

template <class T, class Term, class Sink>
void launch_pack_reduce(const PackTiles& tiles, int64_t rows, int64_t channels, const RowSplit& split,
                        Term term, Sink sink, cudaStream_t stream) {
  const PackRows r{rows, channels, split.part_len, tiles.width};
  const dim3 grid(unsigned(tiles.tiles), unsigned(split.parts));
  pack_reduce_kernel<T><<<grid, 256, 0, stream>>>(r, term, sink);
}

}  // namespace trainer::cuda
