// The small character-level model the language-model tests train on the CPU and the GPU: an
// embedding, learned positions, one causal attention block and a per-position output layer,
// on a text that repeats one 45-byte sentence (so a model that learns reaches high accuracy).
#pragma once

#include <fstream>
#include <string>

namespace trainer::test {

// The model, loss, optimizer and train sections (4 epochs); the data section is the test's.
inline const std::string kTextModel = R"(model:
  input_shape: [16]
  layers:
    - {type: embedding, input_dim: 256, output_dim: 32, channels_first: false}
    - {type: position_embedding, name: wpe}
    - {type: layer_norm, name: ln_1}
    - {type: multi_head_attention, heads: 2, causal: true, name: attn}
    - {type: add, inputs: [attn, wpe], name: res}
    - {type: layer_norm, name: ln_f}
    - {type: dense, units: 256, per_position: true, name: lm_head}
loss: cross_entropy
optimizer: {type: adam, lr: 0.01}
train: {epochs: 4, seed: 1}
)";

// The same model with its output layer reading the embedding's table (tie_to), initialized as
// GPT-2 (a N(0, 1) table would start the logits 30 wide).
inline std::string tied_text_model() {
  std::string yaml = kTextModel;
  const std::string shape = "input_shape: [16]\n";
  yaml.insert(yaml.find(shape) + shape.size(), "  init: gpt2\n");
  const std::string head = "name: lm_head}";
  yaml.replace(yaml.find(head), head.size(), "name: lm_head, tie_to: embedding_1}");
  return yaml;
}

// The data section the language-model tests train with: windows of 16 bytes of `path`, a new one
// every 8, batches of 32, the last tenth of the text for validation.
inline std::string text_data(const std::string& path) {
  return "data: {train: {format: text, path: " + path +
         ", context: 16, stride: 8}, batch_size: 32, validation_split: 0.1}\n";
}

// Writes the sentence 120 times (5,400 bytes) to `path`; returns it.
inline std::string write_sentences(const std::string& path) {
  std::ofstream f(path);
  for (int i = 0; i < 120; ++i) f << "the quick brown fox jumps over the lazy dog. ";
  return path;
}

}  // namespace trainer::test
