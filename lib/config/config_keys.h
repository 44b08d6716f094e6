// The keys of the config's own sections, declared once: lib/config/config.cc validates each section
// with them (read_keys, read_variant), and the schema, docs/config.md and `trainer help` print them
// (lib/schema). The sections whose keys are declared where their reader is registered live there:
// layers (lib/registry), losses (lib/losses), optimizers (lib/optim), data sources
// (lib/data/data_sources.h) and the device (lib/config/device_section.h).
//
// A key of Type::section (model.layers, data.train, loss, ...) is a value of its own form, read by
// its section's code; lib/schema/config_tree.h says which form each one takes.
#pragma once

#include "lib/keys/key_spec.h"

namespace trainer {

const KeySpecs& root_keys();                 // model, loss, optimizer, metrics, data, train, ...
const KeySpecs& model_keys();                // model: input_shape, init, layers, blocks, stages
const KeySpecs& data_keys();                 // data: train, validation, num_classes, batch_size, ...
const KeySpecs& split_keys();                // data.split
const KeySpecs& normalize_keys();            // data.normalize
const KeySpecs& augment_keys();              // data.augment
const KeySpecs& random_resized_crop_keys();  // data.augment.random_resized_crop, its mapping form
const KeySpecs& train_keys();                // train: epochs, seed, loss_scale, ...
const KeySpecs& early_stopping_keys();
const KeySpecs& checkpoint_keys();
const KeySpecs& pipeline_keys();

// schedule: the keys of each type; the type when none is given.
const KeyVariants& schedule_keys();
inline constexpr const char* kDefaultSchedule = "constant";

// One item of metrics: the keys of each metric type, every task's (a run allows those of its
// loss's task, lib/losses/losses.h task_metrics); the type when none is given.
const KeyVariants& metric_keys();
inline constexpr const char* kDefaultMetric = "accuracy";

}  // namespace trainer
