// Embedding lookup on the GPU with the CPU's semantics (kernels/cpu/embedding_cpu.cc).
//   x: (B, L) float token ids   W: (V, D)   y, dy: (B, D, L) (channels-first), or (B, L, D)
// An id is clamped to a row as the CPU does: NaN and anything <= 0 -> 0, >= V-1 -> V-1, else
// truncated. Ids that are not integers in [0, V) are flagged in an EmbeddingReport.
//
// Backward (dW, overwritten) is deterministic and uses no floating-point atomics:
//   1. keys = clamped id of every position p = b*L + l, values = p;
//   2. cub's stable radix sort by key, so each id's positions are contiguous and ascending;
//   3. the sorted positions are cut into chunks of 32, a warp per chunk and tile of 32 columns:
//      for every column d of the tile, a segmented scan over the warp's lanes (a fixed tree of
//      shuffles) sums each run of equal ids inside the chunk. A run that is a whole id goes
//      straight to dW; a run that continues into or from a neighbouring chunk is kept in the
//      workspace. With dy as rows (B, L, D) a warp instead walks its chunk's 32 positions in order,
//      lanes across the row's columns (float4 loads where D is a multiple of 4), and writes each
//      run's sum where the run ends, with the same destinations: GPT-2's 8,192 x 768 took 34 us on
//      an H200 against the scan's 232;
//   4. a warp per chunk (and tile) where an id that crosses chunks ends finds the id's first chunk (a binary
//      search of the sorted keys), adds its run sums (a fixed tree again) and writes its dW row.
// Rows of ids that do not occur are zero (a memset first). The summation order is fixed by the
// batch alone, so results repeat bit for bit. No thread walks positions one dependent load after
// another: the version that gave each (chunk of ~sqrt(B*L), d) to one thread spent ~100 us of a
// 290 us reuters_conv1d step there (H100), waiting on ~100 loads in a row.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace trainer::cuda {

struct EmbeddingGeometry {
  int64_t batch = 0, length = 0, vocab = 0, dim = 0;
  bool channels_first = true;  // y: (B, D, L); false: (B, L, D)
  // constexpr: device code calls it too (--expt-relaxed-constexpr).
  constexpr int64_t positions() const { return batch * length; }
};

// Host-mapped memory the forward kernel writes with plain stores (no atomics) when it clamps an
// id: a flag and one of the ids (any one: threads race, harmlessly, for a diagnostic).
struct EmbeddingReport {
  unsigned int clamped = 0;
  float example = 0.f;
};

// y = W[id] channels-first; flags clamped ids in *report (device-visible pointer; may be null).
void launch_embedding_forward(const EmbeddingGeometry& g, const float* x, const float* w, float* y,
                              EmbeddingReport* report, cudaStream_t stream);

// The backward pass's plan: the chunk size and the scratch it needs (cub's sort included), fixed
// at construction; run() only launches work on the stream.
class EmbeddingBackward {
 public:
  // Asks cub for its scratch size (host-side, needs the current device).
  explicit EmbeddingBackward(const EmbeddingGeometry& g);
  size_t workspace_bytes() const { return total_bytes_; }
  void bind(void* workspace);
  // dw: (V, D), overwritten; accumulate: added into (each row once, in a fixed order).
  void run(const float* x, const float* dy, float* dw, bool accumulate, cudaStream_t stream);

 private:
  EmbeddingGeometry g_;
  int64_t chunk_ = 0, chunks_ = 0;
  int key_bits_ = 1;
  size_t sort_bytes_ = 0, total_bytes_ = 0;
  // Workspace slices.
  uint32_t *keys_ = nullptr, *pos_ = nullptr, *sorted_keys_ = nullptr, *sorted_pos_ = nullptr;
  float *head_ = nullptr, *tail_ = nullptr;  // (chunks, D): runs continuing from / into neighbours
  void* sort_scratch_ = nullptr;
};

}  // namespace trainer::cuda
