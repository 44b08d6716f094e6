// TrainState: where a run stands at a checkpoint, and its JSON form, the "trainer.state" metadata
// of a checkpoint's *.state.safetensors (lib/train/checkpointing.h). The reader trusts nothing:
// every field is checked for its type and range (tests/fuzz/fuzz_train_state.cc).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "lib/model/step_runner.h"

namespace trainer {

struct TrainState {
  int64_t epochs_done = 0;   // epochs fully finished (training, validation, callbacks)
  int64_t batches_done = 0;  // batches of epoch epochs_done + 1 already trained (interrupts)
  int64_t step = 0;          // updates so far: the next one is step + 1
  StepScalars scalars;       // the executor's host copy after update `step`
  MetricSums partial;        // training sums of the unfinished epoch (when batches_done > 0)
  nlohmann::json schedule, early_stopping, best;  // component states
  double seconds = 0;                             // wall time of the run so far
  int64_t skipped_batches = 0;                    // train.on_nan: skip, over the finished epochs
  double first_loss = 0;                          // the first epoch's training loss (growth warning)
  int64_t first_loss_epoch = 0;
  // Loss scaling's state after update `step` (runs that scale the loss; absent from the others'
  // checkpoints, and then a resumed run that scales starts from its configured scale).
  bool has_loss_scale = false;
  LossScaleState loss_scale;
  // Guards: what the checkpoint was trained with.
  std::string optimizer;
  uint64_t seed = 0;
  // The id shared with the weights file of the same checkpoint ("" in files of older versions).
  std::string checkpoint_id;
  // summary.json's values that span the whole run (best_val_accuracy, the final metrics and lr),
  // so that a resumed run, or one with nothing left to train, reports the run and not its tail.
  nlohmann::json summary;
  int64_t batch_size = 0, train_samples = 0;
  // The CPU step's thread count (0: trained on a GPU, or a checkpoint of an older version).
  // oneDNN's convolution gradients depend on it, so --resume takes it again (lib/train/fit.cc).
  int64_t cpu_threads = 0;
};

nlohmann::json train_state_json(const TrainState& s);
// DataError naming `path` and the field when a field is missing, of another type or out of range.
TrainState train_state_from_json(const nlohmann::json& j, const std::string& path);

}  // namespace trainer
