// read_idx: both files are read whole (gunzipped if needed), headers checked against the one
// layout we accept, then the image file's buffer becomes the Dataset storage (header removed,
// cut to the kept samples), so peak memory is about one copy of the pixels.
// Memory layout: u8[i * rows * cols + r * cols + c] = pixel (r, c) of sample i.
#include "datasets/idx_reader.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <utility>
#include <vector>

#include "datasets/file_bytes.h"
#include "lib/core/error.h"

namespace trainer {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;

uint32_t load_be32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", static_cast<unsigned>(v));
  return buf;
}

const char* idx_type_name(uint8_t code) {
  switch (code) {
    case 0x08: return "uint8";
    case 0x09: return "int8";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return "unknown type";
  }
}

// Checks magic, dims > 0 and the exact file size; returns the dims.
// `what` is "images" or "labels"; dim_names names each dimension for messages.
std::vector<uint64_t> parse_idx_header(const std::string& path, const std::vector<uint8_t>& bytes,
                                       uint32_t magic, const char* what,
                                       const std::vector<const char*>& dim_names) {
  const size_t ndims = dim_names.size();
  const size_t header = 4 + 4 * ndims;
  const std::string where = "IDX " + std::string(what) + " file '" + path + "'";
  if (bytes.empty()) throw DataError(where + " is empty");
  const auto too_short = [&] {
    return DataError(where + " is too short for its header: " + std::to_string(bytes.size()) +
                     " bytes, need at least " + std::to_string(header));
  };
  if (bytes.size() < 4) throw too_short();
  const uint32_t found = load_be32(bytes.data());
  if (found != magic) {
    std::string msg = where + ": magic number " + hex32(found) + ", expected " + hex32(magic) +
                      " (uint8, " + std::to_string(ndims) + " dimension" + (ndims > 1 ? "s" : "") + ")";
    const uint32_t other = magic == kImagesMagic ? kLabelsMagic : kImagesMagic;
    if (found == other) {
      msg += "; this is an IDX " + std::string(magic == kImagesMagic ? "labels" : "images") +
             " file: are the images and labels paths swapped?";
    } else if ((found >> 16) == 0 && (found & 0xFF) == ndims) {
      msg += "; it stores " + std::string(idx_type_name((found >> 8) & 0xFF)) +
             " values, only uint8 is supported";
    } else if ((found >> 16) != 0) {
      msg += "; this is not an IDX file";
    }
    throw DataError(msg);
  }
  if (bytes.size() < header) throw too_short();
  std::vector<uint64_t> dims(ndims);
  uint64_t payload = 1;
  std::string dims_str;
  for (size_t d = 0; d < ndims; ++d) {
    dims[d] = load_be32(bytes.data() + 4 + 4 * d);
    if (dims[d] == 0) throw DataError(where + ": dimension " + dim_names[d] + " is 0 in the header");
    if (payload > (std::numeric_limits<uint64_t>::max() - header) / dims[d])
      throw DataError(where + ": header dimensions describe more data than any file can hold");
    payload *= dims[d];
    dims_str += (d ? " x " : "") + std::to_string(dims[d]);
  }
  const uint64_t expected = header + payload;
  if (bytes.size() != expected) {
    const bool short_file = bytes.size() < expected;
    throw DataError(where + (short_file ? " is truncated" : " has trailing bytes") + ": header says " +
                    dims_str + " " + what + " = " + std::to_string(expected) + " bytes, file has " +
                    std::to_string(bytes.size()));
  }
  return dims;
}

}  // namespace

Dataset read_idx(const std::string& images_path, const std::string& labels_path, int num_classes,
                 int64_t limit) {
  if (num_classes < 1 || num_classes > 256)
    throw DataError("IDX labels are uint8: num_classes must be in 1..256, got " + std::to_string(num_classes));
  if (limit < 0) throw DataError("sample limit must be >= 0 (0 = all), got " + std::to_string(limit));

  std::vector<uint8_t> img = read_file_bytes(images_path);
  const std::vector<uint64_t> idims = parse_idx_header(images_path, img, kImagesMagic, "images",
                                                       {"0 (count)", "1 (rows)", "2 (columns)"});
  const std::vector<uint8_t> lab = read_file_bytes(labels_path);
  const std::vector<uint64_t> ldims = parse_idx_header(labels_path, lab, kLabelsMagic, "labels", {"0 (count)"});

  if (idims[0] != ldims[0])
    throw DataError("'" + images_path + "' holds " + std::to_string(idims[0]) + " images but '" + labels_path +
                    "' holds " + std::to_string(ldims[0]) + " labels; they must match");
  const uint8_t* labels = lab.data() + 8;
  for (uint64_t i = 0; i < ldims[0]; ++i) {
    if (labels[i] >= num_classes)
      throw DataError("IDX labels file '" + labels_path + "': label " + std::to_string(labels[i]) + " at index " +
                      std::to_string(i) + " is out of range for num_classes=" + std::to_string(num_classes) +
                      " (allowed 0.." + std::to_string(num_classes - 1) + ")");
  }

  const uint64_t n = limit > 0 ? std::min<uint64_t>(idims[0], static_cast<uint64_t>(limit)) : idims[0];
  const uint64_t per_sample = idims[1] * idims[2];
  Dataset ds;
  ds.name = images_path;
  ds.sample_shape = Shape{1, static_cast<int64_t>(idims[1]), static_cast<int64_t>(idims[2])};
  ds.dtype = SampleDtype::u8;
  img.erase(img.begin(), img.begin() + 16);  // reuse the file buffer: no second copy of the pixels
  img.resize(n * per_sample);
  if (n < idims[0]) img.shrink_to_fit();  // only when a limit cut it: else it would copy it all
  ds.u8 = std::move(img);
  ds.labels.assign(labels, labels + n);
  ds.num_classes = num_classes;
  return ds;
}

}  // namespace trainer
