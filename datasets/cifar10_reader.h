// CIFAR-10 binary reader ("CIFAR-10 binary version": data_batch_1.bin ... test_batch.bin).
// Each record is 1 label byte (0..9) followed by 3072 pixel bytes: 1024 red, 1024 green,
// 1024 blue, each channel row-major 32x32, i.e. exactly CHW. Files may be gzip-compressed.
#pragma once

#include <string>
#include <vector>

#include "datasets/dataset.h"

namespace trainer {

// Concatenates the records of `files` in order. Dataset of uint8 images, sample_shape
// (3, 32, 32), 10 classes, named after the first file. Throws DataError when the list is empty,
// a file is empty or not a whole number of records, or a label is >= 10.
Dataset read_cifar10(const std::vector<std::string>& files);

}  // namespace trainer
