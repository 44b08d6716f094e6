// An in-memory dataset: N samples of one fixed shape, each with a target.
// Samples keep the dtype they were stored in (uint8 pixels stay uint8: 47 MB for Fashion-MNIST
// instead of 188 MB as float); the batch loader converts and normalizes per batch.
//
// Targets are one of two kinds, as the loss declares (lib/losses): a class index per sample
// (`labels`, int32 in [0, num_classes): the classification losses), or `target_width` float
// values per sample (`targets`: regression values, or 0/1 for binary and multi-label losses).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lib/core/shape.h"

namespace trainer {

class SampleStream;  // datasets/sample_stream.h

enum class SampleDtype { u8, f32 };

// What each sample's target is, as a loss takes it.
enum class TargetKind {
  class_index,  // one int32 in [0, num_classes)
  values,       // `width` floats
};

struct TargetLayout {
  TargetKind kind = TargetKind::class_index;
  int64_t width = 1;    // values per sample; class indices per sample (1, or a sequence's positions)
  bool binary = false;  // values: every target is 0 or 1 (binary and multi-label losses)
  // Bytes of one sample's target in a batch (int32 and float are both 4 bytes).
  size_t row_bytes() const { return size_t(width) * 4; }
  bool operator==(const TargetLayout& o) const {
    return kind == o.kind && width == o.width && binary == o.binary;
  }
};

struct Dataset {
  std::string name;    // for messages: "train", "test", or the file it came from
  Shape sample_shape;  // per sample, e.g. (1, 28, 28) for IDX images, (3, 32, 32) for CIFAR
  SampleDtype dtype = SampleDtype::u8;
  std::vector<uint8_t> u8;  // N * sample_shape.numel() when dtype == u8 and !stream
  // Non-null: the uint8 samples are read from it by index as batches are drawn (an image folder
  // larger than its cache budget), and u8 is empty.
  std::shared_ptr<const SampleStream> stream;
  std::vector<float> f32;  // N * sample_shape.numel() when dtype == f32
  std::vector<int32_t>
      labels;  // N * label_positions class indices, each in [0, num_classes), when target_width == 0
  // Class indices a sample: 1, or a sequence's positions (format text and tokens: each window's
  // next tokens, for a loss over every position).
  int64_t label_positions = 1;
  std::vector<float> targets;  // N * target_width values, when target_width > 0
  int64_t target_width = 0;    // 0: class indices in `labels`; K: K float values per sample
  int num_classes = 0;
  // Names a reader found for the classes (image folders' subfolders, a CSV's string labels,
  // sorted), in class-index order; empty when the data has numeric labels only.
  std::vector<std::string> class_names;

  int64_t size() const {
    return target_width > 0 ? static_cast<int64_t>(targets.size()) / target_width
                            : static_cast<int64_t>(labels.size()) / label_positions;
  }
  int64_t sample_numel() const { return sample_shape.numel(); }
  TargetLayout target_layout() const {
    return target_width > 0 ? TargetLayout{TargetKind::values, target_width}
                            : TargetLayout{TargetKind::class_index, label_positions};
  }
};

}  // namespace trainer
