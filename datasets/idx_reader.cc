// read_idx: both headers are read and checked first (against the file size, or for gzip against
// what the file can inflate to), then the labels, then exactly the kept images straight into the
// Dataset storage; images past a limit are inflated only to check the file's size and CRC.
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
    case 0x08:
      return "uint8";
    case 0x09:
      return "int8";
    case 0x0B:
      return "int16";
    case 0x0C:
      return "int32";
    case 0x0D:
      return "float32";
    case 0x0E:
      return "float64";
    default:
      return "unknown type";
  }
}

// An IDX file whose header has been read and checked: the payload it describes is next.
struct IdxHeader {
  std::vector<uint64_t> dims;
  uint64_t expected = 0;  // header + payload bytes
  std::string where;      // "IDX images file 'path'"
  std::string sizes;      // "2 x 3 x 3 images = 34 bytes", for messages
};

// Reads the header (magic, dims > 0) and checks the size it describes against the file before
// any payload is read: exactly the file size for a stored file; for gzip no more than the file
// can inflate to, and no more than this machine's memory. `what` is "images" or "labels".
IdxHeader read_idx_header(DataFile& f, uint32_t magic, const char* what,
                          const std::vector<const char*>& dim_names) {
  const size_t ndims = dim_names.size();
  const size_t header = 4 + 4 * ndims;
  IdxHeader h;
  h.where = "IDX " + std::string(what) + " file '" + f.path() + "'";
  uint8_t bytes[16];
  const size_t got = f.read(bytes, header);
  if (got == 0) throw DataError(h.where + " is empty");
  const auto too_short = [&] {
    return DataError(h.where + " is too short for its header: " + std::to_string(got) +
                     " bytes, need at least " + std::to_string(header));
  };
  if (got < 4) throw too_short();
  const uint32_t found = load_be32(bytes);
  if (found != magic) {
    std::string msg = h.where + ": magic number " + hex32(found) + ", expected " + hex32(magic) +
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
  if (got < header) throw too_short();
  h.dims.resize(ndims);
  uint64_t payload = 1;
  std::string dims_str;
  for (size_t d = 0; d < ndims; ++d) {
    h.dims[d] = load_be32(bytes + 4 + 4 * d);
    if (h.dims[d] == 0) throw DataError(h.where + ": dimension " + dim_names[d] + " is 0 in the header");
    if (payload > (std::numeric_limits<uint64_t>::max() - header) / h.dims[d])
      throw DataError(h.where + ": header dimensions describe more data than any file can hold");
    payload *= h.dims[d];
    dims_str += (d ? " x " : "") + std::to_string(h.dims[d]);
  }
  h.expected = header + payload;
  h.sizes = dims_str + " " + what + " = " + std::to_string(h.expected) + " bytes";
  if (!f.gzipped() && f.file_size() != h.expected)
    throw DataError(h.where + (f.file_size() < h.expected ? " is truncated" : " has trailing bytes") +
                    ": header says " + h.sizes + ", file has " + std::to_string(f.file_size()));
  if (h.expected > f.max_content_size())
    throw DataError(h.where + " is truncated: header says " + h.sizes + ", more than its " +
                    std::to_string(f.file_size()) + " gzip bytes can hold (at most " +
                    std::to_string(f.max_content_size()) + ")");
  check_fits_in_memory(f.path(), payload, std::string("the ") + what);
  return h;
}

// Reads the next n payload bytes into dst (nullptr: read and drop them).
void read_payload(DataFile& f, const IdxHeader& h, uint8_t* dst, uint64_t n) {
  std::vector<uint8_t> scratch(dst ? 0 : std::min<uint64_t>(n, 1 << 20));
  for (uint64_t done = 0; done < n;) {
    const size_t want = size_t(dst ? n - done : std::min<uint64_t>(n - done, scratch.size()));
    const size_t got = f.read(dst ? dst + done : scratch.data(), want);
    if (got == 0)
      throw DataError(h.where + " is truncated: header says " + h.sizes + ", the " +
                      (f.gzipped() ? "decompressed data has " : "file has ") + std::to_string(f.position()));
    done += got;
  }
}

// After the payload: nothing may follow it.
void expect_end(DataFile& f, const IdxHeader& h) {
  if (!f.at_end())
    throw DataError(h.where + " has trailing bytes: header says " + h.sizes + ", the " +
                    (f.gzipped() ? "decompressed data is longer" : "file is longer"));
}

}  // namespace

Dataset read_idx(const std::string& images_path, const std::string& labels_path, int num_classes,
                 int64_t limit) {
  if (num_classes < 1 || num_classes > 256)
    throw DataError("IDX labels are uint8: num_classes must be in 1..256, got " +
                    std::to_string(num_classes));
  if (limit < 0) throw DataError("sample limit must be >= 0 (0 = all), got " + std::to_string(limit));

  // Both headers first: a mismatch or a lying size is reported before any payload is inflated.
  DataFile img(images_path);
  const IdxHeader ih = read_idx_header(img, kImagesMagic, "images", {"0 (count)", "1 (rows)", "2 (columns)"});
  DataFile lab(labels_path);
  const IdxHeader lh = read_idx_header(lab, kLabelsMagic, "labels", {"0 (count)"});
  const uint64_t count = ih.dims[0];
  if (count != lh.dims[0])
    throw DataError("'" + images_path + "' holds " + std::to_string(count) + " images but '" + labels_path +
                    "' holds " + std::to_string(lh.dims[0]) + " labels; they must match");

  std::vector<uint8_t> labels(count);
  read_payload(lab, lh, labels.data(), count);
  expect_end(lab, lh);
  for (uint64_t i = 0; i < count; ++i) {
    if (labels[i] >= num_classes)
      throw DataError("IDX labels file '" + labels_path + "': label " + std::to_string(labels[i]) +
                      " at index " + std::to_string(i) + " is out of range for num_classes=" +
                      std::to_string(num_classes) + " (allowed 0.." + std::to_string(num_classes - 1) + ")");
  }

  const uint64_t n = limit > 0 ? std::min<uint64_t>(count, static_cast<uint64_t>(limit)) : count;
  const uint64_t per_sample = ih.dims[1] * ih.dims[2];
  Dataset ds;
  ds.name = images_path;
  ds.sample_shape = Shape{1, static_cast<int64_t>(ih.dims[1]), static_cast<int64_t>(ih.dims[2])};
  ds.dtype = SampleDtype::u8;
  ds.u8.resize(n * per_sample);
  read_payload(img, ih, ds.u8.data(), n * per_sample);
  read_payload(img, ih, nullptr, (count - n) * per_sample);  // past the limit: read only to check the size
  expect_end(img, ih);
  ds.labels.assign(labels.begin(), labels.begin() + n);
  ds.num_classes = num_classes;
  return ds;
}

}  // namespace trainer
