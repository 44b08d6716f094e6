// Buffers that are never alive at the same time share memory: the static placement of a planned
// step's tensors (a one-time interval-colouring problem, as TFLite's and XLA's buffer assignment
// solve it). Each buffer lives over an inclusive range of step times; a greedy rule places them in
// an order, each at the lowest offset where it overlaps no placed buffer that is alive at the same
// time, and the smallest of three orders' regions is kept (lifetime_packing.cc). Deterministic:
// the same lifetimes give the same offsets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace trainer {

struct Lifetime {
  size_t bytes = 0;
  int64_t first = 0, last = 0;  // alive at every time t with first <= t <= last
};

// Offsets (multiples of `align`, relative to the region's start), one per buffer, and the region's
// size in *total. Two buffers whose times overlap never overlap in memory.
std::vector<size_t> pack_lifetimes(const std::vector<Lifetime>& buffers, size_t* total, size_t align = 256);

}  // namespace trainer
