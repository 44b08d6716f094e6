// safetensors files (the format of Hugging Face's `safetensors` package), float32 tensors only.
//
// Layout:
//   bytes [0, 8)        N, the header length: unsigned 64-bit little-endian
//   bytes [8, 8+N)      UTF-8 JSON object, padded with spaces to a multiple of 8:
//                         {"__metadata__": {"key": "value", ...},            (strings only)
//                          "conv2d_1.weight": {"dtype": "F32", "shape": [10, 1, 5, 5],
//                                              "data_offsets": [0, 1000]}, ...}
//   bytes [8+N, end)    the tensors' data, back to back, little-endian, row-major; data_offsets
//                       are [begin, end) relative to byte 8+N, cover the data with no hole and no
//                       overlap, and the file ends with the last tensor.
// Readable with `from safetensors.numpy import load_file` and safetensors.torch.load_file.
// Writes are atomic (lib/checkpoint/atomic_file.h).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace trainer {

// A tensor to write: `data` holds numel(shape) floats and must stay valid during the call.
struct TensorRef {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;
};

struct StoredTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;
  std::vector<std::string> names;  // in file (offset) order
  std::map<std::string, StoredTensor> tensors;
};

// Throws RuntimeError when the file cannot be written (the previous file stays as it was).
void write_safetensors(const std::string& path, const std::vector<TensorRef>& tensors,
                       const std::map<std::string, std::string>& metadata);

// Throws DataError naming the file for anything malformed: short file, bad header length or
// JSON, unknown or non-F32 dtype, offsets that do not match the shapes or leave holes.
SafetensorsFile read_safetensors(const std::string& path);
// Only the header's __metadata__ (reads the header, not the data).
std::map<std::string, std::string> read_safetensors_metadata(const std::string& path);

// The header (without the 8-byte length or padding) for these tensors, as written.
std::string safetensors_header(const std::vector<TensorRef>& tensors,
                               const std::map<std::string, std::string>& metadata);

}  // namespace trainer
