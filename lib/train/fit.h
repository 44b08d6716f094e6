// fit: the training loop. data -> step -> metrics -> epoch logs (and the run directory).
#pragma once

#include <iosfwd>
#include <string>

#include "kernels/backend_factory.h"
#include "lib/config/config.h"

namespace trainer {

struct FitOptions {
  DeviceRequest device;
  std::string out_dir;  // empty: no run directory
};

struct FitResult {
  int epochs_run = 0;
  double best_val_accuracy = -1;  // -1 without validation data
  int best_epoch = 0;
  double final_train_loss = 0, final_val_loss = 0, final_val_accuracy = 0;
  double final_train_accuracy = 0;
  double seconds = 0;
  int64_t params = 0;
  size_t peak_bytes = 0;
};

// Trains as the config says, printing one timestamped line per epoch and a summary to `out`;
// notes (device fallback, memory plan) go to the log (stderr). Throws trainer::Error subclasses.
FitResult fit(const Config& cfg, const FitOptions& opt, std::ostream& out);

// "2026-11-22 17:13:26" in local time.
std::string timestamp_now();

// Set by SIGINT/SIGTERM handlers; fit finishes the current step and stops with InterruptedError.
void request_stop();
bool stop_requested();

}  // namespace trainer
