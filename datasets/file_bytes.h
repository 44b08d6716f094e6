// Whole-file reads for the dataset readers. A file whose first two bytes are the gzip magic
// (1f 8b) is inflated transparently, so "train-images-idx3-ubyte.gz" and its unpacked twin read
// the same. Concatenated gzip members are joined (as gunzip does); anything else after the last
// member, a truncated stream or a CRC mismatch is a DataError.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainer {

// The file's bytes, gunzipped when gzip-compressed. Throws DataError naming the path and the
// reason (strerror for open/read failures, zlib's message for corrupt data).
std::vector<uint8_t> read_file_bytes(const std::string& path);

}  // namespace trainer
