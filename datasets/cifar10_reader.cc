// read_cifar10: each file is streamed record by record (a gzip file is inflated as it is read),
// so an error names the file and the record index within it and nothing is inflated past it.
#include "datasets/cifar10_reader.h"

#include <cstdint>
#include <filesystem>

#include "datasets/file_bytes.h"
#include "lib/core/error.h"

namespace trainer {
namespace {

constexpr int kClasses = 10;
constexpr size_t kPixels = 3 * 32 * 32;  // CHW
constexpr size_t kRecord = 1 + kPixels;  // label byte + pixels

}  // namespace

Dataset read_cifar10(const std::vector<std::string>& files) {
  if (files.empty()) throw DataError("CIFAR-10: no data files given");
  Dataset ds;
  ds.name = files.front();
  ds.sample_shape = Shape{3, 32, 32};
  ds.dtype = SampleDtype::u8;
  ds.num_classes = kClasses;
  std::vector<uint8_t> record(kRecord);
  // The stored files' records, counted before any is read, so the samples are reserved once: a
  // reserve per file copies everything read so far each time (1,000 small files took a minute).
  uint64_t stored_records = 0;
  for (const std::string& path : files) {
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(path, ec);
    if (!ec && size % kRecord == 0) stored_records += size / kRecord;
  }
  if (stored_records > 0) {
    check_fits_in_memory(files.front(), stored_records * kPixels, "the images");
    ds.u8.reserve(stored_records * kPixels);
    ds.labels.reserve(stored_records);
  }
  for (const std::string& path : files) {
    DataFile f(path);
    const std::string where = "CIFAR-10 file '" + path + "'";
    const auto not_whole = [&](uint64_t size) {
      return DataError(where + " has " + std::to_string(size) + " bytes" +
                       (f.gzipped() ? " decompressed" : "") + ", not a multiple of the " +
                       std::to_string(kRecord) +
                       "-byte record (1 label + 3x32x32 pixels): " + std::to_string(size / kRecord) +
                       " whole records and " + std::to_string(size % kRecord) + " bytes left over");
    };
    if (f.file_size() == 0) throw DataError(where + " is empty");
    // A stored file's size is checked before it is read; a gzip file's as it inflates.
    if (!f.gzipped() && f.file_size() % kRecord != 0) throw not_whole(f.file_size());
    if (!f.gzipped())
      check_fits_in_memory(path, ds.u8.size() + (f.file_size() / kRecord) * kPixels, "the images");
    const size_t first = ds.labels.size();
    for (size_t r = 0;; ++r) {
      const size_t got = f.read(record.data(), kRecord);
      if (got == 0) break;
      if (got < kRecord) throw not_whole(f.position());
      if (record[0] >= kClasses)
        throw DataError(where + ": record " + std::to_string(r) + " (byte offset " +
                        std::to_string(r * kRecord) + ") has label " + std::to_string(record[0]) +
                        ", expected 0..9");
      ds.labels.push_back(record[0]);
      ds.u8.insert(ds.u8.end(), record.begin() + 1, record.end());
    }
    if (ds.labels.size() == first) throw DataError(where + " is empty");
  }
  return ds;
}

}  // namespace trainer
