#include "lib/model/gradient_buckets.h"

#include <algorithm>
#include <map>

#include "lib/core/error.h"
#include "lib/memory/allocator.h"
#include "lib/model/model.h"

namespace trainer {

std::vector<LayerGradients> layer_gradients(const Model& model) {
  std::map<size_t, int64_t> first;  // layer -> its first parameter's offset, in layer order
  for (const TensorSlot& t : model.params()) {
    auto it = first.find(size_t(t.layer));
    if (it == first.end() || t.offset < it->second) first[size_t(t.layer)] = t.offset;
  }
  std::vector<LayerGradients> out;
  int64_t end = model.param_arena_floats();
  for (auto it = first.rbegin(); it != first.rend(); ++it) {
    out.push_back({it->first, it->second, end});
    end = it->second;
  }
  return out;
}

std::vector<GradientBucket> plan_gradient_buckets(const std::vector<LayerGradients>& layers,
                                                  size_t cap_bytes) {
  auto bytes_of = [](const LayerGradients& l) { return size_t(l.end - l.begin) * sizeof(float); };
  for (size_t k = 0; k < layers.size(); ++k) {
    const LayerGradients& l = layers[k];
    if (l.begin > l.end || (k > 0 && l.end != layers[k - 1].begin) ||
        (k + 1 == layers.size() && l.begin != 0))
      throw InternalError("gradient buckets: layer " + std::to_string(l.layer) + "'s gradients [" +
                          std::to_string(l.begin) + ", " + std::to_string(l.end) +
                          ") do not continue the arena downwards from the layer after it");
  }
  // The final bucket: the first layers whose gradients fit in last_bucket_cap(cap_bytes) together.
  size_t tail = layers.size();  // layers[tail..) are the final bucket
  const size_t tail_cap = last_bucket_cap(cap_bytes);
  for (size_t sum = 0; tail > 0 && sum + bytes_of(layers[tail - 1]) <= tail_cap; --tail)
    sum += bytes_of(layers[tail - 1]);
  std::vector<GradientBucket> buckets;
  for (size_t k = 0; k < layers.size(); ++k) {
    const LayerGradients& l = layers[k];
    bool fits = false;                              // k == tail (or the first layer): a new bucket
    if (!buckets.empty() && k > tail) fits = true;  // the final bucket takes every first layer
    if (!buckets.empty() && k < tail)
      fits = cap_bytes == 0 || size_t(buckets.back().floats()) * sizeof(float) + bytes_of(l) <= cap_bytes;
    if (fits) {
      buckets.back().begin = l.begin;
      buckets.back().ready_after = l.layer;
    } else {
      buckets.push_back({l.begin, l.end, l.layer});
    }
  }
  return buckets;
}

size_t last_bucket_cap(size_t cap_bytes) {
  constexpr size_t kLastBucketBytes = size_t(2) << 20;
  return cap_bytes == 0 ? 0 : std::min(cap_bytes, kLastBucketBytes);
}

std::string describe_buckets(const std::vector<GradientBucket>& buckets) {
  std::string s = std::to_string(buckets.size()) + (buckets.size() == 1 ? " bucket (" : " buckets (");
  for (size_t k = 0; k < buckets.size(); ++k)
    s += (k ? ", " : "") + format_bytes(size_t(buckets[k].floats()) * sizeof(float));
  return s + ")";
}

}  // namespace trainer
