// Gradient buckets: the gradient arena cut into contiguous ranges that are all-reduced one by one
// while the backward pass still runs (PyTorch DDP's buckets, bucket_cap_mb; config key
// device.bucket_mb). Planned once, with the executor, from the Model's parameter offsets.
//
// Parameters are laid out layer after layer in layer order (Model: one ArenaLayout), and the
// backward pass runs the layers in reverse, so the gradients of the last layers are complete
// first. A bucket is a run of consecutive layers (in backward order) whose gradients lie side by
// side in the arena; it can be reduced as soon as its last layer in backward order (its lowest
// layer index) has run its backward.
//
// The rule: the final bucket, whose all-reduce nothing hides (it waits for the whole backward
// pass), is kept small: the first layers whose gradients together fit last_bucket_cap(cap) (2 MiB,
// or the cap if smaller) form it. The other layers are walked in backward order, each layer's
// whole range (never split) added to the open bucket; a layer that would take the open bucket past
// the cap closes it first. So every bucket holds at most `cap_bytes`, except a bucket of one layer
// larger than the cap, which holds that layer alone. (vgg11_bn_cifar's 37 MB at 25 MiB: 18.9 MB
// after its last two layers, then 16.5 MB, then the first three layers' 1.5 MB, where the plain
// walk left 18.1 MB for after the backward pass; 2 x H200 at a global batch of 512, a 30 MiB cap,
// which left 8.7 MB last, ran 498.7 steps/s against 492.8 at 25.) cap_bytes 0: no cap, one bucket
// of the whole arena (reduced after the whole backward pass). The buckets cover the arena exactly
// once (alignment padding included: it holds zeros, and reducing it keeps them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace trainer {

class Model;

// The gradients of one layer: [begin, end) floats of the arena, its padding up to the next
// layer's first parameter included.
struct LayerGradients {
  size_t layer = 0;
  int64_t begin = 0, end = 0;
};

struct GradientBucket {
  int64_t begin = 0, end = 0;  // floats of the gradient arena
  size_t ready_after = 0;      // the bucket's lowest layer index: complete once it ran backward
  int64_t floats() const { return end - begin; }
};

// The layers that have parameters, in backward order (highest index first), as ranges that tile
// [0, model.param_arena_floats()).
std::vector<LayerGradients> layer_gradients(const Model& model);

// Buckets in backward order (the order they are launched), by the rule above. `layers`: backward
// order, each range directly below the one before it (InternalError otherwise).
std::vector<GradientBucket> plan_gradient_buckets(const std::vector<LayerGradients>& layers,
                                                  size_t cap_bytes);

// The final bucket's cap for a bucket cap (0: none).
size_t last_bucket_cap(size_t cap_bytes);

// "3 buckets (1.2 MiB, 25 MiB, 0.5 MiB)" for the plan's debug line.
std::string describe_buckets(const std::vector<GradientBucket>& buckets);

}  // namespace trainer
