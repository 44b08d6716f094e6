// fit: the training loop. data -> step -> metrics -> epoch logs, run directory, checkpoints.
//
// The pieces live beside this file:
//   session.h       model, backend, executor and data shared with eval/predict
//   schedules.h     per-step learning rates
//   callbacks.h     best tracking, early stopping, gradient clipping
//   checkpointing.h resumable checkpoints (safetensors) and --resume
//   run_dir.h       config.yaml, metrics.csv, events.jsonl, summary.json
//   progress.h      live line, epoch lines, JSON lines
#pragma once

#include <iosfwd>
#include <string>

#include "lib/backend/backend_registry.h"
#include "lib/config/config.h"
#include "lib/dist/communicator.h"
#include "lib/train/progress.h"

namespace trainer {

struct FitOptions {
  DeviceRequest device;
  std::string out_dir;     // the run directory; empty: none (no checkpoints)
  std::string resume_dir;  // continue the run in this directory from its newest checkpoint
  ReportOptions report;
  // Tests: behave as if SIGINT arrived during update number stop_after_step (0: never).
  int64_t stop_after_step = 0;
  // Data parallel (mpirun): this process is one rank of `comm` (null: a single process). Every
  // rank runs fit with the same config and options; rank 0 alone owns the run directory (it locks
  // it, writes records and checkpoints), the others read a --resume directory without locking it.
  // `out` of ranks other than 0 should discard (the epoch lines are rank 0's).
  Communicator* comm = nullptr;
};

struct FitResult {
  int epochs_run = 0;             // epochs completed, including those before a --resume
  double best_val_accuracy = -1;  // -1 without validation data
  int best_epoch = 0;             // of `monitor`
  std::string monitor;            // checkpoint.best, e.g. "val_accuracy"
  double best_value = 0;
  bool stopped_early = false;
  int64_t steps = 0;  // optimizer updates so far
  double final_train_loss = 0, final_val_loss = 0, final_val_accuracy = 0;
  double final_train_accuracy = 0;
  double final_lr = 0;
  double seconds = 0;
  int64_t params = 0;
  size_t peak_bytes = 0;
  std::string run_dir, final_weights;  // empty without a run directory
};

// Trains as the config says. Epoch lines, JSON lines and the summary go to `out` (see
// progress.h); notes (device fallback, memory plan) go to the log (stderr). Throws trainer::Error
// subclasses; an interrupt (SIGINT/SIGTERM) saves a checkpoint and throws InterruptedError.
FitResult fit(const Config& cfg, const FitOptions& opt, std::ostream& out);

// Set by SIGINT/SIGTERM handlers; fit finishes the current step, saves a checkpoint and stops
// with InterruptedError.
void request_stop();
bool stop_requested();

}  // namespace trainer
