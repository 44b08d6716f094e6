// read_cifar10: each file is validated completely before its records are appended, so an error
// always names the file and the record index within it.
#include "datasets/cifar10_reader.h"

#include "datasets/file_bytes.h"
#include "lib/core/error.h"

namespace trainer {
namespace {

constexpr int kClasses = 10;
constexpr size_t kPixels = 3 * 32 * 32;    // CHW
constexpr size_t kRecord = 1 + kPixels;    // label byte + pixels

}  // namespace

Dataset read_cifar10(const std::vector<std::string>& files) {
  if (files.empty()) throw DataError("CIFAR-10: no data files given");
  Dataset ds;
  ds.name = files.front();
  ds.sample_shape = Shape{3, 32, 32};
  ds.dtype = SampleDtype::u8;
  ds.num_classes = kClasses;
  for (const std::string& path : files) {
    const std::vector<uint8_t> bytes = read_file_bytes(path);
    const std::string where = "CIFAR-10 file '" + path + "'";
    if (bytes.empty()) throw DataError(where + " is empty");
    if (bytes.size() % kRecord != 0)
      throw DataError(where + " has " + std::to_string(bytes.size()) + " bytes, not a multiple of the " +
                      std::to_string(kRecord) + "-byte record (1 label + 3x32x32 pixels): " +
                      std::to_string(bytes.size() / kRecord) + " whole records and " +
                      std::to_string(bytes.size() % kRecord) + " bytes left over");
    const size_t records = bytes.size() / kRecord;
    for (size_t r = 0; r < records; ++r) {
      const uint8_t label = bytes[r * kRecord];
      if (label >= kClasses)
        throw DataError(where + ": record " + std::to_string(r) + " (byte offset " + std::to_string(r * kRecord) +
                        ") has label " + std::to_string(label) + ", expected 0..9");
    }
    for (size_t r = 0; r < records; ++r) {
      const uint8_t* rec = bytes.data() + r * kRecord;
      ds.labels.push_back(rec[0]);
      ds.u8.insert(ds.u8.end(), rec + 1, rec + kRecord);
    }
  }
  return ds;
}

}  // namespace trainer
