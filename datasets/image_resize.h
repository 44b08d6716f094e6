// Resizing and cropping decoded images (datasets/image_decode.h: uint8, HWC), as torchvision's
// Resize(antialias=True) and CenterCrop do on PIL images.
//
// resize_image is Pillow's ImagingResample with the bilinear filter, bit for bit: separable, the
// horizontal pass first (its rows rounded to uint8), then the vertical one; a pass whose size does
// not change is skipped. Each output pixel is a weighted mean of the input pixels under a triangle
// filter centred on it; when shrinking, the triangle's support widens by the factor (in / out), so
// every input pixel contributes (antialiasing). Weights are normalized per output pixel and
// applied in 22-bit fixed point with rounding, as Pillow does for 8-bit images.
//
// shorter_side_size is torchvision's Resize(S): the shorter side becomes S, the longer one
// int(S * long / short). center_crop_offset is torchvision's CenterCrop: round((in - out) / 2),
// half to even (Python's round).
#pragma once

#include <cstdint>
#include <utility>

#include "datasets/image_decode.h"

namespace trainer {

// (h, w, c) -> (out_h, out_w, c); out_h, out_w >= 1.
Image resize_image(const Image& in, int64_t out_h, int64_t out_w);

// (height, width) after resizing the shorter side to `shorter`.
std::pair<int64_t, int64_t> shorter_side_size(int64_t height, int64_t width, int64_t shorter);

// Where a centred window of `out` starts in `in` (out <= in).
int64_t center_crop_offset(int64_t in, int64_t out);

// The centred (out_h, out_w) window; out_h <= in.height and out_w <= in.width.
Image center_crop(const Image& in, int64_t out_h, int64_t out_w);

}  // namespace trainer
