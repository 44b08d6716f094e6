// Checkpoints of a training run, in safetensors files (lib/checkpoint/safetensors.h).
//
// A resumable checkpoint is two files in <run>/checkpoints/, named after where training stood:
//   epoch-0004.safetensors                 the weights: every Model::params() tensor under its
//                                          slot name ("conv2d_1.weight", PyTorch layout) and every
//                                          buffer; metadata: epoch, step, the resolved config
//   epoch-0004.state.safetensors           the optimizer state, one tensor per parameter and
//                                          slot ("conv2d_1.weight.exp_avg", PyTorch's names), and
//                                          metadata "trainer.state": the TrainState as JSON
//   (epoch-0005-batch-000012.* after an interrupt mid-epoch)
// The weights file is written first, the state file last: a checkpoint exists once its state
// file does, and each file is replaced atomically, so a crash or a second Ctrl-C never leaves a
// half-written checkpoint that --resume would pick up.
//
// Resuming restores parameters, buffers, optimizer state, the update counter t and the host
// StepScalars (Nadam's momentum product). Nothing else is needed for bit-identical training on
// the CPU: shuffles are a function of (seed, epoch) and dropout masks of (seed, step, layer).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lib/train/session.h"

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
  int64_t batch_size = 0, train_samples = 0;
};

nlohmann::json train_state_json(const TrainState& s);
TrainState train_state_from_json(const nlohmann::json& j, const std::string& path);

// Host copies of the executor's parameter and buffer arenas.
struct HostWeights {
  std::vector<float> params, buffers;
};
HostWeights download_weights(Session& s);
void upload_weights(Session& s, const HostWeights& w);

// Writes params and buffers (named by the model's slots) to a safetensors file, atomically.
void save_weights(const std::string& path, const Model& model, const HostWeights& w,
                  std::map<std::string, std::string> metadata);
// Reads a weights file into host arenas laid out for `model`. Throws ConfigError naming the
// differences when the file's tensors do not match the model (missing, extra, other shapes),
// DataError when the file is unreadable. `role` names the file in messages ("--weights").
HostWeights load_weights(const std::string& path, const Model& model, const std::string& role);

// The "epoch" metadata of a weights file written by save_checkpoint / fit (-1 when absent).
int64_t weights_epoch(const std::string& path);

struct CheckpointInfo {
  std::string base;  // "<dir>/epoch-0004": + ".safetensors" and ".state.safetensors"
  int64_t step = 0, epochs_done = 0, batches_done = 0;
  std::string weights() const { return base + ".safetensors"; }
  std::string state() const { return base + ".state.safetensors"; }
};

// Saves a resumable checkpoint into `dir` (created when missing) and returns it.
CheckpointInfo save_checkpoint(const std::string& dir, Session& s, const TrainState& state,
                               const std::string& config_yaml);
// Complete checkpoints in `dir`, oldest first (by step). State files that cannot be read are
// skipped with a warning, or, when `unreadable` is given, listed there as "path: reason" instead.
std::vector<CheckpointInfo> list_checkpoints(const std::string& dir,
                                             std::vector<std::string>* unreadable = nullptr);
// Restores a checkpoint into the session and returns its state. ConfigError when the model or the
// optimizer of the config differs from the checkpoint's.
TrainState load_checkpoint(const CheckpointInfo& ck, Session& s, const Config& cfg);
// Deletes all but the newest keep_last checkpoints (0: keep all).
void prune_checkpoints(const std::string& dir, int64_t keep_last);

// A --weights argument: a .safetensors file, or a run directory (its model.safetensors, else its
// newest checkpoint). Throws UsageError when nothing usable is there, DataError when the argument
// is not a regular file or directory (a FIFO would block the reader).
std::string resolve_weights(const std::string& arg);

}  // namespace trainer
