// The first nodes of an exported graph: what the data pipeline does to a sample between the file
// and the network, so that the graph takes values as they are stored (pixel bytes 0..255, a
// CSV's numbers, token ids), as float32, in the model's input shape (N, *model.input_shape).
//
//   1. a CSV source's learned encoding (lib/data/csv_source.h), per feature, as the reader does:
//        missing.fill   Where(IsNaN(x), fill, x)
//        standardize    (x - mean) * float(1 / std)
//      A CSV with categorical columns is refused when either applies: the reader one-hot encodes
//      those columns in place, and the graph does not (its input would be the encoded row).
//   2. data.normalize as the batch loader does (datasets/batch_loader.h), per channel (the first
//      axis of a sample): x * float(scale / std_c) + float(-mean_c / std_c). The scale is the one
//      the run recorded (data.normalize.scale); when none was recorded the graph takes what
//      predict takes from a float32 .npy (scale 1) and a note says so.
// Steps that change nothing (scale 1, mean 0, std 1) add no node.
// Not in the graph: what happens before a sample has the model's input shape (image decoding,
// resize and center_crop, a sequence's padding, channels-last .npy transposition) and training-only
// augmentation.
#pragma once

#include <string>
#include <vector>

#include "lib/config/config.h"
#include "lib/export/onnx_graph.h"

namespace trainer::onnx {

// Appends the preprocessing of `input` (N, *cfg.input_shape) and returns the name of the value
// the first layer takes. `notes` gets one line per step, for the log and the graph's doc string.
std::string add_input_preprocessing(GraphBuilder& b, const Config& cfg, const std::string& input,
                                    std::vector<std::string>* notes);

}  // namespace trainer::onnx
