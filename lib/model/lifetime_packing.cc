#include "lib/model/lifetime_packing.h"

#include <algorithm>
#include <numeric>

#include "lib/memory/allocator.h"

namespace trainer {

std::vector<size_t> pack_lifetimes(const std::vector<Lifetime>& buffers, size_t* total, size_t align) {
  const size_t n = buffers.size();
  auto padded = [&](size_t i) { return align_up(buffers[i].bytes, align); };
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return padded(a) > padded(b); });
  std::vector<size_t> offset(n, 0);
  std::vector<size_t> placed;  // indices, in placement order
  size_t end = 0;
  std::vector<std::pair<size_t, size_t>> busy;  // [begin, end) of placed buffers alive with this one
  for (size_t i : order) {
    const Lifetime& b = buffers[i];
    busy.clear();
    for (size_t k : placed) {
      const Lifetime& o = buffers[k];
      if (o.first <= b.last && b.first <= o.last) busy.emplace_back(offset[k], offset[k] + padded(k));
    }
    std::sort(busy.begin(), busy.end());
    size_t at = 0;
    for (const auto& r : busy) {
      if (r.first >= at + padded(i)) break;  // the gap before r holds it
      at = std::max(at, r.second);
    }
    offset[i] = at;
    end = std::max(end, at + padded(i));
    placed.push_back(i);
  }
  *total = end;
  return offset;
}

}  // namespace trainer
