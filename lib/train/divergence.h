// What fit does about a diverging run.
//
//   non-finite values  The executor checks the loss, the gradients and the weights of every
//                      training step on the device and skips the update of a step whose loss or
//                      gradients are not finite (lib/backend/step_kernels.h, NonfiniteRecord). fit reads the
//                      record where it reads the metrics anyway (the live line, the epoch's end, an
//                      interrupt) and, with train.on_nan: stop (the default), or whenever weights
//                      became non-finite, ends the run: exit 5 naming the epoch and step, the last
//                      good checkpoint kept, summary.json (status "diverged") and the end event
//                      written. With on_nan: skip the skipped batches are counted and reported.
//   a growing loss     An epoch loss above 100x the first epoch's, or (classification losses,
//                      whose loss is a few units at chance) above 1e6, ends the run the same way
//                      with train.divergence: stop (the default): exit 5, status "diverged", this
//                      epoch's weights not saved. With divergence: warn it is warned about once, on
//                      stderr and in summary.json's "warnings", and training goes on.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainer {

// "loss and gradients", "weights", ... for NonfiniteBits.
std::string nonfinite_what(uint32_t bits);

class LossGrowthWatch {
 public:
  // absolute_limit: also flag a loss above 1e6 (not for regression, whose loss has the targets'
  // units squared).
  explicit LossGrowthWatch(bool absolute_limit = true) : absolute_(absolute_limit) {}
  // After each epoch's training loss; returns a warning the first time the loss has grown by
  // orders of magnitude, "" otherwise.
  std::string on_epoch(int64_t epoch, double loss);
  // Carried by checkpoints: the first epoch's loss (0: none yet).
  double first_loss() const { return first_; }
  int64_t first_epoch() const { return first_epoch_; }
  void restore(double first_loss, int64_t first_epoch) {
    first_ = first_loss;
    first_epoch_ = first_epoch;
  }
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  bool absolute_ = true;
  double first_ = 0;
  int64_t first_epoch_ = 0;
  std::vector<std::string> warnings_;
};

}  // namespace trainer
