// trainer export: a trained network as an ONNX model (opset 17, IR version 8, float32), for
// ONNX Runtime and every other ONNX consumer.
//
// The graph, in order:
//   input            float32 (N, *model.input_shape): values as stored, before the data pipeline's
//                    normalization (lib/export/onnx_inputs.h): pixel bytes 0..255, a CSV's
//                    numbers, token ids
//   preprocessing    the run's CSV encoding and data.normalize (lib/export/onnx_inputs.h)
//   the layers       in run order, each as lib/export/onnx_layers.h translates it; values named
//                    after the layers, initializers after the checkpoint's tensors
//   output           the last layer's output, (N, K): what eval's loss sees (logits,
//                    log-probabilities, probabilities or regression values)
//   probabilities    what `trainer predict` writes (classification and binary/multi-label
//                    models): softmax of logits, exp of log-probabilities, the probabilities
//                    themselves, or the sigmoid of binary_cross_entropy's logits
// Metadata (metadata_props): trainer.class_names (JSON), trainer.input (what the input holds),
// trainer.weights (the file exported), trainer.config (the run's resolved config.yaml).
#pragma once

#include <ostream>
#include <string>

#include "lib/config/config.h"
#include "lib/export/onnx_writer.h"
#include "lib/train/checkpointing.h"

namespace trainer {

constexpr int64_t kOnnxOpset = 17;

struct ExportOptions {
  std::string weights;  // a .safetensors file or a run directory (resolve_weights)
  std::string out;      // the .onnx file to write
  std::string format = "onnx";
};

// The ONNX model of `model` (made from cfg) with weights `w`. ConfigError naming the layer when a
// layer type has no translation; `notes` (optional) gets what the preprocessing does.
onnx::Model onnx_model(const Config& cfg, const Model& model, const HostWeights& w,
                       std::vector<std::string>* notes = nullptr);

// Loads the weights, builds the model and writes o.out atomically; prints one summary line to
// `out`. UsageError for another --format or an --out whose folder does not exist.
void export_file(const Config& cfg, const ExportOptions& o, std::ostream& out);

}  // namespace trainer
