// An in-memory labelled dataset: N samples of one fixed shape plus one int32 label each.
// Samples keep the dtype they were stored in (uint8 pixels stay uint8: 47 MB for Fashion-MNIST
// instead of 188 MB as float); the batch loader converts and normalizes per batch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lib/core/shape.h"

namespace trainer {

enum class SampleDtype { u8, f32 };

struct Dataset {
  std::string name;    // for messages: "train", "test", or the file it came from
  Shape sample_shape;  // per sample, e.g. (1, 28, 28) for IDX images, (3, 32, 32) for CIFAR
  SampleDtype dtype = SampleDtype::u8;
  std::vector<uint8_t> u8;      // N * sample_shape.numel() when dtype == u8
  std::vector<float> f32;       // N * sample_shape.numel() when dtype == f32
  std::vector<int32_t> labels;  // N, each in [0, num_classes)
  int num_classes = 0;

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int64_t sample_numel() const { return sample_shape.numel(); }
};

}  // namespace trainer
