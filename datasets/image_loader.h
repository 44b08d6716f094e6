// Decoding a listing of image files (datasets/image_folder.h) into a uint8 Dataset of
// sample_shape (C, H, W), in worker threads.
//
// Each image is decoded (datasets/image_decode.h) to C channels, then sized as the source says:
//   resize: [H, W]           antialiased bilinear to exactly H x W (datasets/image_resize.h)
//   resize: {shorter: S}     the shorter side to S, the aspect kept
//   center_crop: [H, W]      then the centred H x W window
// and must end at model.input_shape's H x W: without resize every image must already have that
// size; an image of another size is an error naming the file and both sizes.
//
// Memory: the source's `cache` and its budget `cache_mb` (MiB of decoded uint8 pixels) say where
// the decoded images live.
//   memory  every image is decoded before the first step, by `threads` workers, into Dataset::u8
//           (N * C * H * W bytes); a set larger than the budget is refused with both numbers.
//   auto    (the default) as memory when the set fits the budget; otherwise streamed, with the
//           budget as cache.
//   none    streamed, nothing cached.
// Streamed: the Dataset holds a SampleStream (datasets/sample_stream.h) and no pixels; the batch
// loader's threads read each batch's images from disk and decode them one batch ahead of the step
// (a bounded queue: the batch in use and the one being filled), in the epoch's seeded order. The
// cache holds the decoded images of the first budget / (C * H * W) files in listing order once
// they were read, so later epochs decode only the rest; its memory is taken as it fills. Host
// memory stays under the budget plus the loader's two batches and one file per thread. A file
// that fails to decode stops training at the batch that draws it, with the same message as the
// up-front decode gives (the up-front decode checks every file before the first step).
//
// Workers (memory): `threads` std::threads (0: the usable cores) take files in order from a
// shared counter and write each image into its own slot, so the result does not depend on the
// thread count. The first failing file in listing order is the error reported (the others stop
// early).
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

enum class ImageCache { automatic, memory, none };

struct ImageLoadOptions {
  int64_t channels = 0, height = 0, width = 0;  // model.input_shape (C, H, W); C is 1 or 3
  ImageSizing sizing;
  int64_t max_pixels = default_max_image_pixels;
  ImageCache cache = ImageCache::automatic;
  int64_t cache_mb = 8192;  // the budget for the decoded set (memory) or the cache (streamed)
  int threads = 0;          // 0: usable_cores()
  std::string key = "data";
  // Called on the calling thread, about 4 times a second while decoding and once at the end.
  std::function<void(int64_t done, int64_t total)> progress;
};

// Decodes and sizes one image file's bytes into dst, (C, H, W). name: for messages.
void prepare_image(const uint8_t* bytes, size_t size, const std::string& name, const ImageLoadOptions& o,
                   uint8_t* dst);

// The listing's images with its labels and class names: decoded in order into Dataset::u8, or
// streamed (Dataset::stream), as o.cache says.
Dataset load_images(const ImageListing& listing, const ImageLoadOptions& o);

// How many of n images a streamed source keeps decoded in memory (0 for cache: none).
int64_t cached_image_count(const ImageLoadOptions& o, int64_t n);

}  // namespace trainer
