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
#include "lib/train/train_state.h"

namespace trainer {

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
  int64_t cpu_threads = 0;  // the CPU step's threads it was trained with (0: a GPU, or unrecorded)
  std::string weights() const { return base + ".safetensors"; }
  std::string state() const { return base + ".state.safetensors"; }
};

// Saves a resumable checkpoint into `dir` (created when missing) and returns it.
CheckpointInfo save_checkpoint(const std::string& dir, Session& s, const TrainState& state,
                               const std::string& config_yaml);
// Complete checkpoints in `dir`, oldest first (by step). State files that cannot be read, whose
// weights file is missing or whose weights file is not of the same checkpoint (epoch, step, id)
// are skipped with a warning, or, when `unreadable` is given, listed there as "path: reason".
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
