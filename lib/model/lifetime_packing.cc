#include "lib/model/lifetime_packing.h"

#include <algorithm>
#include <numeric>

#include "lib/memory/allocator.h"

namespace trainer {
namespace {

// First fit in `order`: each buffer at the lowest offset where it meets no placed buffer alive at
// the same time. Returns the region's size.
size_t first_fit(const std::vector<Lifetime>& buffers, const std::vector<size_t>& order, size_t align,
                 std::vector<size_t>& offset) {
  const auto padded = [&](size_t i) { return align_up(buffers[i].bytes, align); };
  offset.assign(buffers.size(), 0);
  std::vector<size_t> placed;                   // indices, in placement order
  std::vector<std::pair<size_t, size_t>> busy;  // [begin, end) of placed buffers alive with this one
  size_t end = 0;
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
  return end;
}

}  // namespace

// Three orders, the smallest region kept (the earlier on a tie, so that a plan changes only where
// it shrinks): the largest first in the callers' order (the rule before these); the largest first,
// ties by birth; and by birth, the largest first among those born together. For buffers of one size
// first fit by birth is optimal on intervals (as many slots as buffers alive at once); the callers'
// order alone could leave a residual network's activation gradients a slot above that.
std::vector<size_t> pack_lifetimes(const std::vector<Lifetime>& buffers, size_t* total, size_t align) {
  const size_t n = buffers.size();
  const auto padded = [&](size_t i) { return align_up(buffers[i].bytes, align); };
  std::vector<size_t> as_given(n);
  std::iota(as_given.begin(), as_given.end(), size_t(0));
  std::vector<size_t> by_size = as_given, by_birth = as_given;
  std::stable_sort(as_given.begin(), as_given.end(),
                   [&](size_t a, size_t b) { return padded(a) > padded(b); });
  std::stable_sort(by_size.begin(), by_size.end(), [&](size_t a, size_t b) {
    if (padded(a) != padded(b)) return padded(a) > padded(b);
    return buffers[a].first < buffers[b].first;
  });
  std::stable_sort(by_birth.begin(), by_birth.end(), [&](size_t a, size_t b) {
    if (buffers[a].first != buffers[b].first) return buffers[a].first < buffers[b].first;
    return padded(a) > padded(b);
  });
  std::vector<size_t> offset, other;
  size_t end = first_fit(buffers, as_given, align, offset);
  for (const std::vector<size_t>* order : {&by_size, &by_birth}) {
    const size_t e = first_fit(buffers, *order, align, other);
    if (e < end) {
      end = e;
      offset.swap(other);
    }
  }
  *total = end;
  return offset;
}

}  // namespace trainer
