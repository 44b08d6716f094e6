// Shared by fuzz_png and fuzz_jpeg: decode_image, and prepare_image's resize and crop paths, on
// one input. Input: [options][a][b][image bytes]. options bit 0: 1 channel (else 3); bit 1: size
// the image (prepare_image) to a+1 x b+1 by resize: [H, W]; bit 2 with bit 1: by {shorter: a+1}
// and center_crop a+1 x a+1 instead. The pixel limit is 2^22, so no input allocates more than
// 12 MiB of pixels (the default limit's 268 MB would make every run slow, not find more).
#pragma once

#include "datasets/image_decode.h"
#include "datasets/image_loader.h"
#include "tests/fuzz/fuzz_input.h"

namespace trainer::fuzz {

inline int fuzz_one_image(const uint8_t* data, size_t size) {
  InputBytes in(data, size);
  const uint8_t options = in.u8();
  const int64_t a = in.u8() % 32 + 1, b = in.u8() % 32 + 1;
  const std::vector<uint8_t> bytes = in.rest();
  const int channels = options & 1 ? 1 : 3;
  constexpr int64_t kMaxPixels = int64_t(1) << 22;
  expect_typed_errors([&] {
    if (!(options & 2)) {
      const Image im = decode_image(bytes.data(), bytes.size(), "fuzz", channels, kMaxPixels);
      if (im.pixels.size() != size_t(im.height * im.width * channels)) std::abort();
      return;
    }
    ImageLoadOptions o;
    o.channels = channels;
    o.max_pixels = kMaxPixels;
    if (options & 4) {
      o.sizing.shorter = a;
      o.sizing.crop_h = o.sizing.crop_w = a;
      o.height = o.width = a;
    } else {
      o.sizing.resize_h = o.height = a;
      o.sizing.resize_w = o.width = b;
    }
    std::vector<uint8_t> out(size_t(channels * o.height * o.width));
    prepare_image(bytes.data(), bytes.size(), "fuzz", o, out.data());
  });
  return 0;
}

}  // namespace trainer::fuzz
