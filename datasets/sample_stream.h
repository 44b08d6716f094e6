// SampleStream: samples made on demand instead of held in Dataset::u8, for data sets larger than
// the memory they may take (an image folder over its cache budget: datasets/image_loader.h).
//
// The batch loader (datasets/batch_loader.h) asks for the rows of each batch by index from its
// worker threads, one batch ahead of the step, so a stream must be safe to read from several
// threads at once. Reading sample i always gives the same bytes (runs repeat and resume exactly).
// A failed read throws DataError naming the file; the loader rethrows it from next().
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace trainer {

class SampleStream {
 public:
  virtual ~SampleStream() = default;
  virtual int64_t size() const = 0;
  // Writes sample i (0 <= i < size()) to dst: the dataset's sample_numel() uint8 values.
  virtual void read(int64_t i, uint8_t* dst) const = 0;
  // The stream of this one's samples rows[0], rows[1], ... (validation splits, limits), sharing
  // whatever this one caches.
  virtual std::shared_ptr<const SampleStream> subset(const std::vector<int64_t>& rows) const = 0;
};

}  // namespace trainer
