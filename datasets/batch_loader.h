// BatchLoader: turns a Dataset into float batches on a background thread, one batch ahead.
//
// Double buffering: two batch buffers are allocated in the constructor and reused forever (no
// allocation per batch). While the caller trains on batch k (the buffer it "holds"), the worker
// gathers batch k+1 in the permuted order, converts u8 -> float, normalizes, and checks that
// every value is finite into the other buffer. Handshake: one mutex + condition_variable, no
// sleeps or polling. An exception thrown while preparing a batch is stored and rethrown by the
// next() call that would have returned that batch; start_epoch() clears it.
//
// Batch layout: x is (rows, *sample_shape) row-major floats; y is the rows' targets as the dataset
// holds them (datasets/dataset.h): (rows) int32 class indices, or (rows, target_width) floats.
//
// Large batches are filled by several threads (RowWorkers, rows split evenly; helpers that sleep
// between batches): one core gathering shuffled rows is memory-bound, 1.4 ms per 512 CIFAR-sized
// rows, which is longer than a GPU step.
//
// Streamed datasets (Dataset::stream: image folders larger than their cache) are read here: the
// rows of the batch being filled are decoded by all the loader's threads, each taking the next row
// as it finishes one, into a staging buffer of one batch, then converted as stored rows are. So
// decoding runs one batch ahead of the step, and memory stays at three batches whatever the set.
//
// Data parallelism: a loader made for rank r of R ranks yields only its shard of each global
// batch (lib/core/shard.h): the same batches in the same shuffled order as one process's loader,
// cut into R contiguous pieces; a piece may be empty (rows = 0).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "datasets/dataset.h"
#include "datasets/row_workers.h"

namespace trainer {

// y = (x * scale - mean[c]) / std[c], c = channel = index along dim 0 of sample_shape (for an
// (F) sample that is the feature). mean / std hold 0 values (mean 0 / std 1), 1 value (shared by
// all channels) or one value per channel; std values must be > 0.
struct Normalization {
  float scale = 1.f;
  std::vector<float> mean;
  std::vector<float> std;
};

// What an input value of 0 becomes after `norm` in each channel of samples of `sample_shape`
// (the loader's own arithmetic: x * (scale / std_c) + (-mean_c / std_c) at x = 0): the value
// data.augment pads images with. Throws DataError for mean/std lists of the wrong length.
std::vector<float> normalized_zero(const Normalization& norm, const Shape& sample_shape);

// torchvision's RandomResizedCrop, on the host as each training batch is filled: for each image
// (C, H, W) a crop of a random area fraction in [scale_lo, scale_hi] of the image and a random
// aspect ratio in [ratio_lo, ratio_hi] (log-uniform; 10 tries, then the centre crop of the nearest
// ratio, torchvision's rule) is resized bilinearly (align_corners false, no antialiasing: the
// tensor path of torchvision's v1 transform) to (C, out_h, out_w). The draws are a function of
// (seed, epoch, the row's position in the epoch), so runs repeat and resume exactly, and every
// data-parallel rank draws what one process would. The images may be any size of at least one
// pixel; out_h = 0: off.
struct RandomResizedCrop {
  int64_t out_h = 0, out_w = 0;
  double scale_lo = 0.08, scale_hi = 1.0, ratio_lo = 3.0 / 4.0, ratio_hi = 4.0 / 3.0;
  bool active() const { return out_h > 0; }
};

// The crop that RandomResizedCrop draws for an image of h x w at (seed, epoch, position): rows
// [top, top + crop_h), columns [left, left + crop_w).
struct CropBox {
  int64_t top = 0, left = 0, crop_h = 0, crop_w = 0;
};
CropBox draw_crop(const RandomResizedCrop& c, int64_t h, int64_t w, uint64_t seed, int64_t epoch,
                  int64_t position);

// data.loader_threads' default when training on a GPU, given the cores this process may use (its
// affinity mask: lib/core/usable_cores.h): half of them, 1 to 8
// (a GPU host's cores are idle; on one H100 host, cifar10_cnn's fit at batch 256 ran 1,253 /
// 1,434 / 1,594 steps/s with 1 / 4 / 8 threads, trainer bench 1,574). On the CPU the backend
// trains on every core and the loader keeps one thread.
int default_loader_threads(int cores);

class BatchLoader {
 public:
  // `data` must outlive the loader and stay unchanged. batch_size >= 1. drop_last=false keeps
  // the final partial batch. Throws DataError for an empty dataset, bad normalization sizes or
  // values, or drop_last with fewer samples than one batch.
  // rank / ranks: this loader's shard of every batch (0 of 1: whole batches). threads: how many
  // threads fill a batch of at least 2^18 values (>= 1); smaller batches take the worker alone.
  // crop: RandomResizedCrop of every row (training batches), the batch rows then of (C, out_h,
  // out_w); the dataset's samples must be images (C, H, W).
  BatchLoader(const Dataset& data, int64_t batch_size, bool shuffle, bool drop_last, Normalization norm,
              uint64_t seed, int rank = 0, int ranks = 1, int threads = 1, RandomResizedCrop crop = {});
  ~BatchLoader();  // stops and joins the worker, also mid-epoch
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  int64_t batches_per_epoch() const { return batches_; }
  // Changes the threads that fill large batches (>= 1), from the next batch filled on.
  void set_threads(int threads);

  // Begins epoch `epoch` (any value; the same (seed, epoch) always gives the same order): a
  // Fisher-Yates permutation drawn from SplitMix64(mix64(seed) + epoch), identity when !shuffle.
  // Abandons the rest of the previous epoch. The worker starts preparing batch `first_batch`
  // immediately: a resumed epoch skips the batches it trained without reading them (0 <= first_batch
  // <= batches_per_epoch()).
  void start_epoch(int64_t epoch, int64_t first_batch = 0);

  // Blocks until the next batch is ready; returns false at the end of the epoch (and keeps
  // returning false until start_epoch). The pointers stay valid until the following next() call
  // (start_epoch does not invalidate them). Rethrows an error raised while preparing the batch.
  // batch_rows: this shard's rows (0 .. batch size); global_rows: the whole batch's rows.
  bool next(const float** x, const void** y, int64_t* batch_rows, int64_t* global_rows = nullptr);
  // The same for a dataset of class indices (target_width 0), with y typed as its labels.
  bool next(const float** x, const int32_t** labels, int64_t* batch_rows, int64_t* global_rows = nullptr) {
    const void* y = nullptr;
    const bool more = next(x, &y, batch_rows, global_rows);
    *labels = static_cast<const int32_t*>(y);
    return more;
  }

 private:
  void worker_loop();
  void fill(int slot, int64_t batch, int max_threads);  // runs on the worker, without the lock
  // Sample u8 (or f32: the other is null), cropped for its position in the epoch, into o.
  void crop_row(const uint8_t* u8, const float* f32, int64_t position, float* o) const;

  const Dataset& data_;
  const int64_t batch_size_;
  const bool shuffle_;
  const uint64_t seed_;
  const int rank_, ranks_;
  int threads_ = 1;  // under mu_ (the worker reads it when it starts a batch)
  int64_t batches_ = 0;
  int64_t numel_ = 0, channels_ = 1, inner_ = 0;  // sample_numel = channels_ * inner_
  RandomResizedCrop crop_;
  int64_t out_numel_ = 0;         // a batch row's values: numel_, or channels_ * crop_.out_h * crop_.out_w
  int64_t epoch_ = 0;             // of start_epoch, for the crops' draws
  std::vector<float> mul_, add_;  // per channel: y = x * mul_[c] + add_[c]
  std::vector<int64_t> perm_;     // sample order of the current epoch
  std::vector<float> x_buf_[2];
  std::vector<uint32_t> y_buf_[2];   // the targets' 4-byte words (int32 or float), as the dataset's
  std::vector<uint8_t> staged_;      // a streamed dataset's rows of the batch being filled
  int64_t rows_[2] = {0, 0};         // this shard's rows of the batch in each buffer
  int64_t global_rows_[2] = {0, 0};  // the whole batch's

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;     // destructor asked the worker to exit
  bool active_ = false;   // start_epoch has been called
  bool filling_ = false;  // the worker is writing a buffer (and reading perm_)
  int64_t produced_ = 0;  // batches of this epoch published so far
  int held_ = -1;         // buffer the caller holds (returned by the last next()), or -1
  int ready_ = -1;        // buffer holding a finished, not yet returned batch, or -1
  std::exception_ptr error_;
  std::unique_ptr<RowWorkers> workers_;  // the worker's helpers for large batches (made at the first)
  std::thread worker_;                   // last: starts after everything above is initialised
};

}  // namespace trainer
