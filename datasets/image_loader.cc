#include "datasets/image_loader.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "datasets/file_bytes.h"
#include "datasets/image_resize.h"
#include "datasets/sample_stream.h"
#include "lib/core/error.h"
#include "lib/core/usable_cores.h"

namespace trainer {
namespace {

std::string hw(int64_t h, int64_t w) { return std::to_string(h) + "x" + std::to_string(w); }

std::string mib(uint64_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

// Reads the image file at `path` and prepares it into dst (prepare_image), as the up-front decode
// and the stream both do.
void prepare_image_file(const std::string& path, const ImageLoadOptions& o, uint8_t* dst) {
  const std::vector<uint8_t> bytes = read_stored_file(path);
  prepare_image(bytes.data(), bytes.size(), path, o, dst);
}

// Decoded images of the first `slots` files in listing order, kept once read. Each slot is
// written once: the reader that finds it empty claims it (empty -> writing), copies the image in
// and publishes it (ready, release); a reader that sees ready (acquire) copies it out. Memory is
// reserved, not touched, until a slot is written, so the resident size grows with the cache.
class ImageCacheSlots {
 public:
  ImageCacheSlots(int64_t slots, int64_t sample) : slots_(slots), sample_(sample) {
    if (slots_ <= 0) return;
    try {
      bytes_.reset(new uint8_t[size_t(slots_ * sample_)]);
      state_.reset(new std::atomic<uint8_t>[size_t(slots_)]);
    } catch (const std::bad_alloc&) {
      throw OutOfMemoryError("out of host memory for an image cache of " + mib(uint64_t(slots_ * sample_)));
    }
    for (int64_t i = 0; i < slots_; ++i) state_[size_t(i)].store(kEmpty, std::memory_order_relaxed);
  }
  // Copies image i into dst when it is cached.
  bool get(int64_t i, uint8_t* dst) const {
    if (i >= slots_ || state_[size_t(i)].load(std::memory_order_acquire) != kReady) return false;
    std::memcpy(dst, bytes_.get() + i * sample_, size_t(sample_));
    return true;
  }
  void put(int64_t i, const uint8_t* src) {
    if (i >= slots_) return;
    uint8_t expected = kEmpty;
    if (!state_[size_t(i)].compare_exchange_strong(expected, kWriting, std::memory_order_acq_rel)) return;
    std::memcpy(bytes_.get() + i * sample_, src, size_t(sample_));
    state_[size_t(i)].store(kReady, std::memory_order_release);
  }

 private:
  static constexpr uint8_t kEmpty = 0, kWriting = 1, kReady = 2;
  const int64_t slots_, sample_;
  std::unique_ptr<uint8_t[]> bytes_;
  std::unique_ptr<std::atomic<uint8_t>[]> state_;
};

// The streamed images: file rows_[i] of the listing (all of them in order when rows_ is empty).
class ImageStream : public SampleStream {
 public:
  struct Shared {
    std::vector<std::string> paths;  // the listing's files
    ImageLoadOptions options;        // without progress
    std::unique_ptr<ImageCacheSlots> cache;
  };
  ImageStream(std::shared_ptr<Shared> shared, std::vector<int64_t> rows)
      : shared_(std::move(shared)), rows_(std::move(rows)) {}

  int64_t size() const override {
    return rows_.empty() ? int64_t(shared_->paths.size()) : int64_t(rows_.size());
  }

  void read(int64_t i, uint8_t* dst) const override {
    if (i < 0 || i >= size())
      throw InternalError("image stream: sample " + std::to_string(i) + " of " + std::to_string(size()));
    const int64_t file = rows_.empty() ? i : rows_[size_t(i)];
    if (shared_->cache && shared_->cache->get(file, dst)) return;
    const std::string& path = shared_->paths[size_t(file)];
    try {
      prepare_image_file(path, shared_->options, dst);
    } catch (const DataError& e) {  // met mid-training: say which source it belongs to
      throw DataError(shared_->options.key + ": " + e.what());
    }
    if (shared_->cache) shared_->cache->put(file, dst);
  }

  std::shared_ptr<const SampleStream> subset(const std::vector<int64_t>& rows) const override {
    std::vector<int64_t> files;
    files.reserve(rows.size());
    for (int64_t r : rows) {
      if (r < 0 || r >= size())
        throw InternalError("image stream subset: row " + std::to_string(r) + " of " +
                            std::to_string(size()));
      files.push_back(rows_.empty() ? r : rows_[size_t(r)]);
    }
    return std::make_shared<ImageStream>(shared_, std::move(files));
  }

 private:
  std::shared_ptr<Shared> shared_;
  std::vector<int64_t> rows_;
};

}  // namespace

int64_t cached_image_count(const ImageLoadOptions& o, int64_t n) {
  if (o.cache == ImageCache::none) return 0;
  const int64_t sample = std::max<int64_t>(1, o.channels * o.height * o.width);
  return std::min<int64_t>(n, (o.cache_mb << 20) / sample);
}

void prepare_image(const uint8_t* bytes, size_t size, const std::string& name, const ImageLoadOptions& o,
                   uint8_t* dst) {
  Image im = decode_image(bytes, size, name, int(o.channels), o.max_pixels);
  const ImageSizing& z = o.sizing;
  const int64_t h0 = im.height, w0 = im.width;
  // resize_image works as Pillow does: rows first, to (h0, new width), then columns. A very tall,
  // thin image grown wide makes that intermediate image huge (4,000,000 x 1 to 32 wide: 384 MB),
  // so the pixel limit bounds it as it bounds the decoded image.
  const auto resize = [&](int64_t out_h, int64_t out_w) {
    if (h0 * out_w > o.max_pixels)
      throw DataError("'" + name + "' is " + hw(h0, w0) + " (height x width): resizing it to " +
                      hw(out_h, out_w) + " passes through " + hw(h0, out_w) +
                      ", more pixels than the limit of " + std::to_string(o.max_pixels) + " (max_pixels)");
    return resize_image(im, out_h, out_w);
  };
  if (z.resize_h > 0) {
    im = resize(z.resize_h, z.resize_w);
  } else if (z.shorter > 0) {
    // A long thin image grows with the aspect kept: the pixel limit applies to the result too.
    const auto size_hw = shorter_side_size(im.height, im.width, z.shorter);
    if (size_hw.first * size_hw.second > o.max_pixels)
      throw DataError("'" + name + "' is " + hw(h0, w0) + " (height x width): resize {shorter: " +
                      std::to_string(z.shorter) + "} would make it " + hw(size_hw.first, size_hw.second) +
                      ", more pixels than the limit of " + std::to_string(o.max_pixels) + " (max_pixels)");
    im = resize(size_hw.first, size_hw.second);
  }
  if (z.crop_h > 0) {
    if (im.height < z.crop_h || im.width < z.crop_w)
      throw DataError(
          "'" + name + "' is " + hw(h0, w0) + " (height x width)" +
          (z.resize_h > 0 || z.shorter > 0 ? ", " + hw(im.height, im.width) + " after resize," : "") +
          " smaller than center_crop " + hw(z.crop_h, z.crop_w));
    im = center_crop(im, z.crop_h, z.crop_w);
  }
  if (im.height != o.height || im.width != o.width) {
    const std::string shape = "[" + std::to_string(o.channels) + ", " + std::to_string(o.height) + ", " +
                              std::to_string(o.width) + "]";
    if (!z.any())
      throw DataError("'" + name + "' is " + hw(h0, w0) + " (height x width) but model.input_shape is " +
                      shape + ": every image must have that size, or set " + o.key + ".resize: [" +
                      std::to_string(o.height) + ", " + std::to_string(o.width) + "]");
    throw DataError("'" + name + "' is " + hw(h0, w0) + " (height x width) and " + hw(im.height, im.width) +
                    " after " + o.key + ".resize/center_crop, but model.input_shape is " + shape +
                    (z.shorter > 0 && z.crop_h == 0
                         ? ": resize: {shorter: S} keeps the aspect ratio; add center_crop: [" +
                               std::to_string(o.height) + ", " + std::to_string(o.width) + "]"
                         : ""));
  }
  // (H, W, C) -> (C, H, W)
  const int64_t C = o.channels, HW = o.height * o.width;
  for (int64_t i = 0; i < HW; ++i)
    for (int64_t c = 0; c < C; ++c) dst[c * HW + i] = im.pixels[size_t(i * C + c)];
}

Dataset load_images(const ImageListing& listing, const ImageLoadOptions& o) {
  if (o.channels != 1 && o.channels != 3)
    throw ConfigError(o.key +
                      ": image formats need model.input_shape [1, H, W] (gray) or [3, H, W] (RGB), not " +
                      std::to_string(o.channels) + " channels");
  const int64_t N = int64_t(listing.files.size()), sample = o.channels * o.height * o.width;
  const uint64_t bytes = uint64_t(N) * uint64_t(sample), budget = uint64_t(o.cache_mb) << 20;
  if (bytes > budget && o.cache == ImageCache::memory)
    throw DataError(o.key + ": " + std::to_string(N) + " images of " + std::to_string(o.channels) + "x" +
                    hw(o.height, o.width) + " take " + std::to_string(bytes) + " bytes (" + mib(bytes) +
                    ") decoded, more than the budget " + o.key + ".cache_mb: " + std::to_string(o.cache_mb) +
                    " MiB; raise it if this machine has the memory, or set " + o.key +
                    ".cache: auto to stream the images from disk");
  Dataset d;
  d.sample_shape = Shape{o.channels, o.height, o.width};
  d.dtype = SampleDtype::u8;
  d.labels.reserve(size_t(N));
  for (const ImageFile& f : listing.files) d.labels.push_back(f.label);
  d.num_classes = listing.num_classes;
  d.class_names = listing.class_names;
  if (o.cache == ImageCache::none || bytes > budget) {
    auto shared = std::make_shared<ImageStream::Shared>();
    shared->paths.reserve(size_t(N));
    for (const ImageFile& f : listing.files) shared->paths.push_back(f.path);
    shared->options = o;
    shared->options.progress = nullptr;
    const int64_t slots = cached_image_count(o, N);
    if (slots > 0) {
      check_fits_in_memory(o.key, uint64_t(slots) * uint64_t(sample), "the image cache");
      shared->cache = std::make_unique<ImageCacheSlots>(slots, sample);
    }
    d.stream = std::make_shared<ImageStream>(std::move(shared), std::vector<int64_t>{});
    return d;
  }
  check_fits_in_memory(o.key, bytes, "the decoded images");
  try {
    d.u8.resize(size_t(bytes));
  } catch (const std::bad_alloc&) {
    throw OutOfMemoryError(o.key + ": out of host memory for the decoded images (" + mib(bytes) + ")");
  }

  std::atomic<int64_t> next{0}, done{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::condition_variable finished;
  int64_t error_index = N;  // the first failing file in listing order (under mu)
  std::exception_ptr error;
  const auto work = [&] {
    for (int64_t i; !failed.load() && (i = next.fetch_add(1)) < N;) {
      const std::string& path = listing.files[size_t(i)].path;
      try {
        prepare_image_file(path, o, d.u8.data() + i * sample);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (i < error_index) error_index = i, error = std::current_exception();
        failed = true;
      }
      if (done.fetch_add(1) + 1 == N) {
        std::lock_guard<std::mutex> lock(mu);
        finished.notify_all();
      }
    }
  };
  const int threads =
      int(std::min<int64_t>(o.threads > 0 ? o.threads : usable_cores(), std::max<int64_t>(N, 1)));
  std::vector<std::thread> workers;
  try {
    for (int t = 0; t < threads; ++t) workers.emplace_back(work);
  } catch (const std::system_error&) {
    failed = true;  // no more threads: the ones started finish, then a clear error
    for (std::thread& w : workers) w.join();
    throw RuntimeError(o.key + ": cannot start image decoding threads");
  }
  {
    std::unique_lock<std::mutex> lock(mu);
    while (done.load() < N && !failed.load()) {
      finished.wait_for(lock, std::chrono::milliseconds(250));
      if (o.progress) {
        lock.unlock();
        o.progress(done.load(), N);
        lock.lock();
      }
    }
  }
  for (std::thread& w : workers) w.join();
  if (error) std::rethrow_exception(error);
  if (o.progress) o.progress(N, N);
  return d;
}

}  // namespace trainer
