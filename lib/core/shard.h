// Data-parallel sharding: which rows of a global batch each rank trains on.
//
// Rank r of `ranks` takes the contiguous rows [rows*r/ranks, rows*(r+1)/ranks) of every global
// batch (integer division). The shards partition the batch in rank order, their sizes differ by at
// most one, and a batch with fewer rows than ranks leaves some ranks an empty shard (they still
// take part in the step: they add zero gradients). Every rank derives its shard from the same
// shuffled order, so the ranks together see exactly the batches one process would.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace trainer {

struct Shard {
  int64_t begin = 0;  // first row of the global batch
  int64_t rows = 0;   // may be 0
};

inline Shard shard_of(int64_t rows, int rank, int ranks) {
  const int64_t begin = rows * rank / ranks, end = rows * (rank + 1) / ranks;
  return {begin, end - begin};
}

// The most rows any rank's shard of a `rows`-row batch has.
inline int64_t max_shard_rows(int64_t rows, int ranks) { return (rows + ranks - 1) / ranks; }

// Every non-empty shard size of these global batch sizes over `ranks` ranks, sorted, without
// repeats: the batch sizes a rank's executor is planned for.
inline std::vector<int64_t> shard_batch_sizes(const std::vector<int64_t>& global, int ranks) {
  std::vector<int64_t> out;
  for (int64_t g : global)
    for (int64_t rows : {g / ranks, max_shard_rows(g, ranks)})
      if (rows > 0) out.push_back(rows);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace trainer
