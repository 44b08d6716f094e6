// Data augmentation of image batches, one formula for every backend (callable on the host and in
// CUDA kernels): torchvision's RandomCrop(size=(H, W), padding=P) then RandomHorizontalFlip(0.5),
// on the raw image before normalization, applied to normalized inputs by padding with the value
// a 0 byte normalizes to in each channel.
//
// Sample n of step t draws, from the counter RNG (lib/core/counter_rng.h) with the stream
// augment_stream(t) and the counters 3n, 3n + 1, 3n + 2: the crop's top offset dy and left offset
// dx, each uniform in [0, 2P], and the flip (probability 1/2). Output pixel (i, j) of channel c is
//   x[c, i + dy - P, j' + dx - P] with j' = W - 1 - j when flipped, else j,
// or fill[c] where that falls outside the image. A pure function of (seed, step, n): CUDA graphs
// replay it, resume repeats it, and the CPU and the GPU produce the same bits.
//   in, out: (B, C, H, W), distinct buffers
#pragma once

#include <cstdint>

#include "lib/core/counter_rng.h"
#include "lib/core/host_device.h"

namespace trainer {

constexpr int kMaxAugmentChannels = 16;

struct AugmentSpec {
  int64_t channels = 0, height = 0, width = 0;
  int32_t crop_padding = 0;  // P
  bool flip = false;         // random horizontal flip
  float fill[kMaxAugmentChannels] = {};
  bool active() const { return crop_padding > 0 || flip; }
};

TRAINER_HD uint64_t augment_stream(uint64_t step) { return (step << 16) ^ 0xA06E47u; }

// Sample n's draws at step `step`.
struct AugmentDraw {
  int32_t dy = 0, dx = 0;
  bool flip = false;
};

TRAINER_HD AugmentDraw augment_draw(const AugmentSpec& s, uint64_t seed, uint64_t step, int64_t n) {
  const uint64_t stream = augment_stream(step), c = uint64_t(n) * 3;
  const int32_t span = 2 * s.crop_padding + 1;
  AugmentDraw d;
  if (s.crop_padding > 0) {
    d.dy = int32_t(counter_uniform(seed, stream, c) * float(span));
    d.dx = int32_t(counter_uniform(seed, stream, c + 1) * float(span));
    if (d.dy >= span) d.dy = span - 1;  // counter_uniform < 1, but keep the bound explicit
    if (d.dx >= span) d.dx = span - 1;
  }
  if (s.flip) d.flip = counter_uniform(seed, stream, c + 2) < 0.5f;
  return d;
}

// Output pixel (c, i, j) of one sample from its input plane x_c (H, W) and its draw.
TRAINER_HD float augment_pixel(const AugmentSpec& s, const AugmentDraw& d, const float* x_c, int64_t c,
                               int64_t i, int64_t j) {
  const int64_t jj = d.flip ? s.width - 1 - j : j;
  const int64_t si = i + d.dy - s.crop_padding, sj = jj + d.dx - s.crop_padding;
  if (si < 0 || si >= s.height || sj < 0 || sj >= s.width) return s.fill[c];
  return x_c[si * s.width + sj];
}

}  // namespace trainer
