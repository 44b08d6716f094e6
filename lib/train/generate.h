// trainer generate: sampling from a language model trained on format text (bytes) or tokens
// (ids), one token at a time, each printed as it comes.
//
// The model sees the last `context` tokens of the prompt and what it generated so far; with fewer,
// they fill the first positions and the rest is padding that a causal model never reads. The
// next token is drawn from the softmax of the last position's logits divided by the temperature,
// restricted to the top_k most likely when top_k > 0; temperature 0 takes the most likely (greedy).
// The same seed and weights give the same text.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "lib/backend/backend_registry.h"
#include "lib/config/config.h"

namespace trainer {

struct GenerateOptions {
  DeviceRequest device;
  std::string weights;  // a .safetensors file or a run directory
  std::string prompt;   // format text: the text; format tokens: ids separated by spaces or commas
  int64_t tokens = 200;
  double temperature = 1.0;
  int64_t top_k = 0;  // 0: every token
  uint64_t seed = 0;
};

// The next token from one position's logits (C of them), as GenerateOptions says; u: a uniform
// draw in [0, 1).
int32_t sample_token(const float* logits, int64_t classes, double temperature, int64_t top_k, double u);

// Writes the generated tokens to `out` as they come (text: the bytes; tokens: ids, a space
// between); returns them. Errors: a model not trained on format text or tokens (UsageError), a
// prompt with ids outside the vocabulary (UsageError).
std::vector<int32_t> generate_tokens(const Config& cfg, const GenerateOptions& o, std::ostream& out);

}  // namespace trainer
