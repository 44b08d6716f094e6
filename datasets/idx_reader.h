// IDX reader for MNIST / Fashion-MNIST (http://yann.lecun.com/exdb/mnist/ format): big-endian
// header, raw or gzip-compressed. Images: magic 0x00000803 (uint8, 3 dims: count, rows, cols);
// labels: magic 0x00000801 (uint8, 1 dim: count). Validation is strict: exact file sizes,
// matching counts, every label (not just the kept ones) in [0, num_classes).
#pragma once

#include <cstdint>
#include <string>

#include "datasets/dataset.h"

namespace trainer {

// Dataset of uint8 images, sample_shape (1, rows, cols), named after images_path.
// limit > 0 keeps only the first `limit` samples (all of them when the files hold fewer);
// limit == 0 keeps everything. Throws DataError on any malformed input.
Dataset read_idx(const std::string& images_path, const std::string& labels_path, int num_classes,
                 int64_t limit = 0);

}  // namespace trainer
