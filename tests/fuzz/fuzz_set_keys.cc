// apply_override (lib/config/config.h): one --set KEY=VALUE on a config tree, as `trainer fit
// --set` applies it, then the whole config parsed. Input: [u16 segment count][segments, each
// [n][n - 1 bytes]][value bytes]: the key is the segments joined by dots, so the fuzzer reaches
// deep keys (thousands of segments) and odd segments (empty, digits, long) without guessing dots.
// A key deeper than a config may nest must be refused, never walked into a stack overflow.
#include "lib/config/config.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

const char* kBase = R"(model:
  input_shape: [2]
  blocks:
    pair:
      params: {units: 4}
      layers: [{type: dense, units: $units}, {type: relu}]
  layers: [{type: pair}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: adam, lr: 0.01}
data: {train: {format: disc, samples: 100}, num_classes: 2, batch_size: 10}
train: {epochs: 1}
)";

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainer;
  fuzz::InputBytes in(data, size);
  // Up to 65,535 segments, each [n][n - 1 bytes]: n = 0 repeats the previous segment (and so does
  // an input that has run out), n = 1 is an empty segment. A short input reaches deep keys.
  const size_t segments = in.u16();
  std::string key, last = "model";
  for (size_t i = 0; i < segments; ++i) {
    const uint8_t n = in.u8();
    std::string seg = last;
    if (n == 1) seg.clear();
    if (n > 1) {
      const std::vector<uint8_t> bytes = in.take(n - 1);
      if (!bytes.empty()) seg.assign(bytes.begin(), bytes.end());
    }
    if (!seg.empty()) last = seg;
    key += (i ? "." : "") + seg;
  }
  const std::vector<uint8_t> value = in.rest();
  const std::string assignment = key + "=" + std::string(value.begin(), value.end());
  fuzz::expect_typed_errors([&] { parse_config(kBase, "fuzz.yaml", {assignment}); });
  return 0;
}
