// The `device:` key of a config: a device string (cpu | auto | gpu | gpu:N, lib/backend/
// device_spec.h) or a mapping with the memory settings and the data-parallel settings too:
//   device: {type: gpu, gpus: '0,1', memory_limit: 4096, memory_growth: true, bucket_mb: 25,
//            gradient_compression: none, sync_batchnorm: false}
// Both resolve to the mapping form, which --print-config and the run directory's config.yaml show.
#pragma once

#include <yaml-cpp/yaml.h>

#include "lib/config/config.h"
#include "lib/keys/key_spec.h"

namespace trainer {

// The keys of the mapping form.
const KeySpecs& device_keys();

// Rewrites a valid device string at root["device"] as the mapping, so that --set device.KEY=V
// and the dedicated flags apply to either form. Anything else is left for read_device to judge.
void normalize_device(YAML::Node& root);

// Validates `device` (either form) and fills c.device, c.memory_limit_mib, c.memory_growth,
// c.bucket_mb, c.gradient_compression, c.sync_batchnorm and c.resolved["device"].
void read_device(Config& c, NodeReader& r);

}  // namespace trainer
