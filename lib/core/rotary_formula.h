// Rotary position embeddings (RoFormer; GPT-NeoX's and Llama's "rotate half" layout), one formula
// for the CPU and CUDA kernels: in each head of hd features (hd even), feature i < hd/2 and feature
// i + hd/2 form a pair that position pos rotates by pos * base^(-2 i / hd). Applied to q and k after
// the input projection, so that q.k depends on the positions' difference only. The inverse (sign
// -1) rotates back: the backward pass's dq and dk.
#pragma once

#include <cmath>
#include <cstdint>

#include "lib/core/host_device.h"

namespace trainer {

// The angle of pair i (0 <= i < hd/2) at position pos.
TRAINER_HD float rotary_angle(int64_t pos, int64_t i, int64_t hd, float base) {
  return float(pos) * powf(base, -2.f * float(i) / float(hd));
}

// (a, b) = (a cos - b sin, b cos + a sin), with sin's sign flipped by sign -1 (the inverse).
TRAINER_HD void rotary_rotate(float& a, float& b, float angle, float sign) {
  const float c = cosf(angle), s = sign * sinf(angle);
  const float na = a * c - b * s, nb = b * c + a * s;
  a = na;
  b = nb;
}

}  // namespace trainer
