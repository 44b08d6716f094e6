// The validation split of data.split (data.validation_split: f is its short form).
//
//   shuffle: true, stratify: true (the default)  each class keeps its share in validation
//   shuffle: true, stratify: false               a seeded random subset of every sample
//   shuffle: false                               Keras' fit(validation_split=f): the last rows
//
// Sizes. Validation always gets V = n - int(n * (1 - f)) samples, Keras' formula, whatever the
// mode (so switching the mode never changes the sizes; V is ceil(n * f) up to float rounding, as
// scikit-learn's train_test_split takes it). Stratified, class c of n_c samples gets
// floor(n_c * V / n) (exact integer arithmetic), and the V - sum of floors samples left over go
// one each to the classes with the largest remainders n_c * V mod n (ties: the lower class index),
// except that a class is given its last training sample only when no other class can take it.
// So the total is exactly V, and each class's share is within one sample of n_c * f.
//
// Which samples: one Fisher-Yates permutation of the sample indices drawn from SplitMix64 of the
// seed (lib/core/rng.h: the same on every platform); stratified, each class's first quota
// samples in that order go to validation, otherwise the permutation's first V. Both parts keep
// the file's order. The same data and seed give the same split in fit, eval and --resume.
//
// Strata: the class index (labels). Float targets (target_width > 0) stratify only when they are
// binary: one value per sample, every one 0 or 1; they are stratified by that value. Other float
// targets (regression, multi-label) are shuffled without stratification (SplitResult::note).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "datasets/dataset.h"

namespace trainer {

struct SplitOptions {
  double fraction = 0;   // in (0, 1): the share of samples that validation takes
  bool shuffle = true;   // false: the last rows, in file order (Keras)
  bool stratify = true;  // per class shares; needs shuffle
  uint64_t seed = 0;
};

struct SplitResult {
  Dataset train, validation;
  // Non-empty when stratify was asked for but the targets have no classes to stratify by.
  std::string note;
};

// Which samples split_validation puts in validation (true), the same draw; `note` as
// SplitResult::note. Throws as split_validation does.
std::vector<bool> validation_mask(const Dataset& data, const SplitOptions& options,
                                  std::string* note = nullptr);

// Both parts copy their samples and targets; names get " (training part)" / " (validation
// part)" appended. Throws DataError when the fraction is not in (0, 1) or either side would be
// empty, and InternalError for stratify without shuffle (the config refuses it).
SplitResult split_validation(const Dataset& data, const SplitOptions& options);

// A warning naming every class that one side has and the other lacks ("" when both hold the same
// classes, or when the targets are not classes). class_names: names to show beside the ids
// (empty: ids only).
std::string class_coverage_warning(const Dataset& train, const Dataset& validation,
                                   const std::vector<std::string>& class_names);

}  // namespace trainer
