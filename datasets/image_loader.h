// Decoding a listing of image files (datasets/image_folder.h) into an in-memory uint8 Dataset of
// sample_shape (C, H, W), in worker threads.
//
// Each image is decoded (datasets/image_decode.h) to C channels, then sized as the source says:
//   resize: [H, W]           antialiased bilinear to exactly H x W (datasets/image_resize.h)
//   resize: {shorter: S}     the shorter side to S, the aspect kept
//   center_crop: [H, W]      then the centred H x W window
// and must end at model.input_shape's H x W: without resize every image must already have that
// size; an image of another size is an error naming the file and both sizes.
//
// Memory: the whole decoded set is held (N * C * H * W bytes). Before anything is decoded the
// estimate is checked against the source's budget (cache_mb, MiB) and refused with both numbers
// when it is larger. What streaming larger-than-memory folders would need, and is not built yet:
// the batch loader asking a source for rows by index instead of reading Dataset::u8, a bounded
// queue of decoded batches filled by these workers ahead of the step (the epoch's permutation is
// known at its start, so the order stays a function of the seed), and a cache of decoded images
// up to the budget so that later epochs skip decoding what fits.
//
// Workers: `threads` std::threads (0: the usable cores) take files in order from a shared
// counter and write each image into its own slot, so the result does not depend on the thread
// count. The first failing file in listing order is the error reported (the others stop early).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "datasets/dataset.h"
#include "datasets/image_decode.h"
#include "datasets/image_folder.h"

namespace trainer {

struct ImageSizing {
  int64_t resize_h = 0, resize_w = 0;  // resize: [H, W]; 0: not given
  int64_t shorter = 0;                 // resize: {shorter: S}; 0: not given
  int64_t crop_h = 0, crop_w = 0;      // center_crop: [H, W]; 0: not given
  bool any() const { return resize_h > 0 || shorter > 0 || crop_h > 0; }
};

struct ImageLoadOptions {
  int64_t channels = 0, height = 0, width = 0;  // model.input_shape (C, H, W); C is 1 or 3
  ImageSizing sizing;
  int64_t max_pixels = default_max_image_pixels;
  int64_t cache_mb = 8192;  // the budget for the decoded set
  int threads = 0;          // 0: usable_cores()
  std::string key = "data";
  // Called on the calling thread, about 4 times a second while decoding and once at the end.
  std::function<void(int64_t done, int64_t total)> progress;
};

// Decodes and sizes one image file's bytes into dst, (C, H, W). name: for messages.
void prepare_image(const uint8_t* bytes, size_t size, const std::string& name, const ImageLoadOptions& o,
                   uint8_t* dst);

// The listing's images, decoded in order, with its labels and class names.
Dataset load_images(const ImageListing& listing, const ImageLoadOptions& o);

}  // namespace trainer
