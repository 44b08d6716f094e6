// NumPy .npy files (format versions 1.0, 2.0, 3.0), read whole and optionally gzip-compressed.
// Accepted dtypes (little-endian, C order only): uint8 ('|u1' / '<u1'), int32 ('<i4'),
// int64 ('<i8'), float32 ('<f4') and float64 ('<f8', numpy's default, narrowed to float32 on
// load). Fortran-ordered, big-endian, object, structured and other dtypes are rejected with a
// message saying how to re-save the array.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "datasets/dataset.h"

namespace trainer {

// One array; exactly one of u8 / i64 / f32 holds the numel() elements, in C order:
//   u8  for |u1, <u1        i64 for <i4, <i8        f32 for <f4, <f8
struct NpyArray {
  std::string descr;           // as written in the file, e.g. "<f4"
  std::vector<int64_t> shape;  // empty for a 0-d (scalar) array
  std::vector<uint8_t> u8;
  std::vector<int64_t> i64;
  std::vector<float> f32;

  int64_t numel() const;
};

NpyArray read_npy(const std::string& path);
// The descr and shape only (no data is read): what a file holds, before reading it.
NpyArray read_npy_header(const std::string& path);

// x: (N, ...) samples. y, by what the loss takes (`target`):
//   class_index  (N,) or (N, 1) integer labels in [0, num_classes);
//   values       (N,) or (N, K) numbers of any accepted dtype (regression values, or 0/1
//                multi-hot rows for multi-label), K floats per sample (target_width).
// uint8 x gives a u8 dataset; int32/int64/float32/float64 x gives an f32 dataset (integers, e.g.
// token ids, must be exactly representable: |v| <= 2^24). sample_shape = x.shape[1:], or (1)
// for a 1-D x. Named after x_path.
// channels_last: x is a batch of channels-last images (N, H, W, C), as Keras and PIL store them;
// it is transposed on load to trainer's channels-first (N, C, H, W). A DataError for any other rank.
// target: values reads y as floats, (N) or (N, K); class_index as integer labels.
Dataset dataset_from_npy(const std::string& x_path, const std::string& y_path, int num_classes,
                         bool channels_last = false, const TargetLayout& target = {});

// (N, H, W, C) -> (N, C, H, W), element type T; `shape` becomes the transposed shape.
template <typename T>
void nhwc_to_nchw(std::vector<T>& data, std::vector<int64_t>& shape);

// Writes a version 1.0 '<f4' C-order array of the given shape (numel(shape) floats from data).
void write_npy_f32(const std::string& path, const std::vector<int64_t>& shape, const float* data);
// The same for '<i8' (int64) arrays.
void write_npy_i64(const std::string& path, const std::vector<int64_t>& shape, const int64_t* data);
// The same for '|u1' (uint8) arrays.
void write_npy_u8(const std::string& path, const std::vector<int64_t>& shape, const uint8_t* data);

}  // namespace trainer
