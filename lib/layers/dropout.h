// dropout / dropout2d: in training, zero each element (dropout) or each whole channel (dropout2d,
// x: (B, C, ...)) with probability `rate` and scale the survivors by 1/(1-rate); identity in eval.
// Masks come from a counter-based hash of (seed, step, layer, index), so every backend draws the
// same mask for the same step and no RNG state lives on the device.
#pragma once

#include "lib/keys/key_spec.h"
#include "lib/registry/layer.h"

namespace trainer {

class Dropout : public Layer {
 public:
  Dropout(const KeyValues& v, bool channelwise);
  static KeySpecs keys();
  float rate = 0.5f;
  bool channelwise = false;
  void describe(YAML::Node& out) const override { out["rate"] = rate; }

 protected:
  Shape infer(const Shape& in) override;
};

}  // namespace trainer
