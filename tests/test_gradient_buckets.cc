// Gradient buckets (lib/model/gradient_buckets.h): the plan that cuts the gradient arena into the
// ranges the device all-reduce launches during the backward pass. Whatever the cap, the buckets
// follow backward order, are contiguous, cover the arena exactly once and never split a layer;
// each holds at most the cap, except a layer larger than the cap, which is a bucket of its own;
// the final one is the longest run of first layers within last_bucket_cap; and each other is as
// full as the rule allows (the next layer would not have fitted).
#include <catch2/catch.hpp>

#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/core/rng.h"
#include "lib/model/gradient_buckets.h"
#include "lib/model/model.h"

using namespace trainer;

namespace {

// Layers with parameters, given in layer order as (layer index, floats); returned in backward
// order as ranges that tile [0, sum of floats).
std::vector<LayerGradients> arena_of(const std::vector<std::pair<size_t, int64_t>>& layers) {
  std::vector<LayerGradients> out;
  int64_t at = 0;
  for (const auto& [layer, floats] : layers) {
    out.push_back({layer, at, at + floats});
    at += floats;
  }
  return {out.rbegin(), out.rend()};
}

struct Expected {
  int64_t begin, end;
  size_t ready_after;
};

void require_buckets(const std::vector<GradientBucket>& got, const std::vector<Expected>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    INFO("bucket " << k);
    CHECK(got[k].begin == want[k].begin);
    CHECK(got[k].end == want[k].end);
    CHECK(got[k].ready_after == want[k].ready_after);
  }
}

// The rule's invariants for any plan of `layers` (backward order) under `cap_bytes`.
void require_valid_plan(const std::vector<LayerGradients>& layers, size_t cap_bytes,
                        const std::vector<GradientBucket>& buckets) {
  REQUIRE_FALSE(buckets.empty());
  REQUIRE(buckets.front().end == layers.front().end);  // the arena's end
  // The final bucket: the longest run of first layers (the end of `layers`) within its cap.
  const size_t tail_cap = last_bucket_cap(cap_bytes);
  size_t tail = layers.size(), tail_bytes = 0;
  auto layer_bytes = [&](size_t k) { return size_t(layers[k].end - layers[k].begin) * sizeof(float); };
  while (tail > 0 && tail_bytes + layer_bytes(tail - 1) <= tail_cap) {
    --tail;
    tail_bytes += layer_bytes(tail);
  }
  REQUIRE(buckets.back().begin == 0);
  size_t l = 0;  // the next layer, in backward order
  for (size_t k = 0; k < buckets.size(); ++k) {
    const GradientBucket& b = buckets[k];
    INFO("bucket " << k << " [" << b.begin << ", " << b.end << ")");
    if (k > 0) REQUIRE(b.end == buckets[k - 1].begin);  // contiguous, downwards, no overlap or gap
    // Whole layers: the bucket starts at a layer's end and stops at a layer's begin.
    REQUIRE(layers[l].end == b.end);
    size_t members = 0;
    while (l < layers.size() && layers[l].begin >= b.begin) ++l, ++members;
    REQUIRE(layers[l - 1].begin == b.begin);
    REQUIRE(b.ready_after == layers[l - 1].layer);  // the last layer to run backward
    const size_t bytes = size_t(b.floats()) * sizeof(float);
    if (cap_bytes == 0) continue;
    if (members > 1) REQUIRE(bytes <= cap_bytes);                  // over the cap only as one layer alone
    if (l == layers.size() && tail > 0 && tail < layers.size()) {  // the final bucket: the tail exactly
      REQUIRE(l - members == tail);
      REQUIRE(bytes <= tail_cap);
      continue;
    }
    if (l < layers.size() && l != tail)  // as full as allowed: the next layer would have gone over the cap
      REQUIRE(bytes + size_t(layers[l].end - layers[l].begin) * sizeof(float) > cap_bytes);
  }
  REQUIRE(l == layers.size());
}

}  // namespace

TEST_CASE("gradient buckets follow backward order and hold whole layers up to the cap", "[buckets]") {
  // Layers 0, 2 and 4 have parameters (1 and 3 are activations): 100, 64 and 836 floats.
  const std::vector<LayerGradients> layers = arena_of({{0, 100}, {2, 64}, {4, 836}});
  SECTION("no cap: one bucket of the whole arena, complete after the whole backward pass") {
    require_buckets(plan_gradient_buckets(layers, 0), {{0, 1000, 0}});
  }
  SECTION("a cap above the arena: one bucket too") {
    require_buckets(plan_gradient_buckets(layers, 4000), {{0, 1000, 0}});
  }
  SECTION("a cap below every layer: one bucket per layer, the last layer's first") {
    require_buckets(plan_gradient_buckets(layers, 1), {{164, 1000, 4}, {100, 164, 2}, {0, 100, 0}});
  }
  SECTION("a layer that would go over the cap closes the bucket before it") {
    // 836 floats = 3344 bytes; + 64 floats would make 3600 > 3400; 64 + 100 floats = 656 bytes fit.
    require_buckets(plan_gradient_buckets(layers, 3400), {{164, 1000, 4}, {0, 164, 0}});
  }
  SECTION("a layer larger than the cap is a bucket of its own, never split") {
    require_buckets(plan_gradient_buckets(layers, 1024), {{164, 1000, 4}, {0, 164, 0}});
    require_valid_plan(layers, 1024, plan_gradient_buckets(layers, 1024));
  }
  SECTION("exactly the cap still fits") {
    require_buckets(plan_gradient_buckets(layers, 656), {{164, 1000, 4}, {0, 164, 0}});
    require_buckets(plan_gradient_buckets(layers, 655), {{164, 1000, 4}, {100, 164, 2}, {0, 100, 0}});
  }
  SECTION("a model without parameters has no buckets") { REQUIRE(plan_gradient_buckets({}, 1024).empty()); }
  REQUIRE(describe_buckets(plan_gradient_buckets(layers, 1)) == "3 buckets (3.3 KiB, 0.2 KiB, 0.4 KiB)");
}

TEST_CASE("gradient buckets keep the final bucket, after the backward pass, within 2 MiB", "[buckets]") {
  // vgg11_bn_cifar's eight convolutions (layers 0, 2, ..., 14 here), floats of weights: at 25 MiB
  // the plain walk would leave the last six layers (18.1 MB) for after the backward pass.
  const std::vector<LayerGradients> layers = arena_of({{0, 1728},
                                                       {2, 73728},
                                                       {4, 294912},
                                                       {6, 589824},
                                                       {8, 1179648},
                                                       {10, 2359296},
                                                       {12, 2359296},
                                                       {14, 2359296}});
  const int64_t c4 = 1728 + 73728 + 294912, c6 = c4 + 589824 + 1179648, end = c6 + 2 * 2359296 + 2359296;
  const size_t cap = size_t(25) << 20;
  REQUIRE(last_bucket_cap(cap) == size_t(2) << 20);
  REQUIRE(last_bucket_cap(1000) == 1000);
  REQUIRE(last_bucket_cap(0) == 0);
  require_buckets(plan_gradient_buckets(layers, cap),
                  {{c6 + 2359296, end, 12}, {c4, c6 + 2359296, 6}, {0, c4, 0}});
  require_valid_plan(layers, cap, plan_gradient_buckets(layers, cap));
  // A first layer larger than the final bucket's cap: no separate final bucket.
  const std::vector<LayerGradients> big_first = arena_of({{0, 1 << 20}, {1, 1 << 20}});
  require_buckets(plan_gradient_buckets(big_first, cap), {{0, 2 << 20, 0}});
}

TEST_CASE("gradient buckets keep the rule for any layer sizes and caps", "[buckets]") {
  SplitMix64 rng(11);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<std::pair<size_t, int64_t>> sizes;
    const int n = 1 + int(rng.next_below(12));
    for (int i = 0; i < n; ++i) sizes.push_back({size_t(2 * i), 64 * int64_t(1 + rng.next_below(40))});
    const std::vector<LayerGradients> layers = arena_of(sizes);
    for (size_t cap : {size_t(0), size_t(1), size_t(256), size_t(1000), size_t(4096), size_t(20000)}) {
      INFO("trial " << trial << ", cap " << cap);
      require_valid_plan(layers, cap, plan_gradient_buckets(layers, cap));
    }
  }
}

TEST_CASE("gradient buckets refuse layer ranges that do not tile the arena downwards", "[buckets]") {
  std::vector<LayerGradients> gap = arena_of({{0, 100}, {2, 64}});
  gap[0].begin += 1;  // a float between the two layers belongs to neither
  REQUIRE_THROWS_AS(plan_gradient_buckets(gap, 1), InternalError);
  const std::vector<LayerGradients> upwards{{0, 0, 100}, {2, 100, 164}};  // layer order, not backward
  REQUIRE_THROWS_AS(plan_gradient_buckets(upwards, 1), InternalError);
}

TEST_CASE("a model's layer gradients tile its parameter arena in backward order, padding included",
          "[buckets]") {
  // dense 6 -> 10 (60 + 10 floats), relu, dense 10 -> 3 (30 + 3): every tensor padded to the
  // arena's alignment, so the ranges are wider than the tensors.
  const YAML::Node spec = YAML::Load("[{type: dense, units: 10}, {type: relu}, {type: dense, units: 3}]");
  const Model model(Shape{6}, spec, InitScheme::torch, "test.yaml");
  const std::vector<LayerGradients> layers = layer_gradients(model);
  REQUIRE(layers.size() == 2);
  CHECK(layers[0].layer == 2);
  CHECK(layers[1].layer == 0);
  CHECK(layers[0].end == model.param_arena_floats());
  CHECK(layers[1].begin == 0);
  CHECK(layers[0].begin == layers[1].end);
  for (const TensorSlot& t : model.params()) {
    const LayerGradients& l = t.layer == 2 ? layers[0] : layers[1];
    INFO(t.name);
    CHECK(t.offset >= l.begin);
    CHECK(t.offset + t.shape.numel() <= l.end);
  }
  // One bucket per layer under a 1-byte cap; one in all without a cap.
  require_valid_plan(layers, 1, plan_gradient_buckets(layers, 1));
  CHECK(plan_gradient_buckets(layers, 1).size() == 2);
  CHECK(plan_gradient_buckets(layers, 0).size() == 1);
}
