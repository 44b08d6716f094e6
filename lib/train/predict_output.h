// What `trainer predict` writes (--write): the class probabilities, the arg-max class, or both.
//
//   .csv  probabilities: one column per class, headed by its name (data.class_names) or class_<id>;
//         class: columns predicted_id and, with class names, predicted_name; both: all of these.
//         Fields are quoted as RFC 4180 requires (a name with a comma or a quote). Inputs that
//         were image files get a first column `file`, each row's image path.
//   .npy  probabilities: (N, C) float32; class: (N,) int64 class ids; both: refused (one array
//         per .npy file), with a message that says to use .csv.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainer {

enum class PredictWrite { probabilities, arg_max, both };

// "probabilities" | "class" | "both" (UsageError naming --write otherwise).
PredictWrite parse_predict_write(const std::string& s);

// Checks that `path` can hold `what` (UsageError otherwise), before any work is done.
void check_predict_output(const std::string& path, PredictWrite what);

// probs: (N, C) row-major. Replaces `path` atomically (.csv) or writes it (.npy). files: N paths
// for the .csv's `file` column, or empty (no such column; a .npy never has one).
void write_predictions(const std::string& path, PredictWrite what, const std::vector<float>& probs, int64_t N,
                       int64_t C, const std::vector<std::string>& names,
                       const std::vector<std::string>& files = {});

// The predictions of a loss on float targets, values: (N, K) row-major. Regression (binary
// false): the model's outputs, one column per output named by names or value_<k> ("value" for one).
// Binary and multi-label: the probabilities sigmoid(logit), one column per label (names or
// label_<k>; "probability" for one) with --write probabilities or both, and each label's 0/1
// decision (probability above 0.5; "predicted", or predicted_<name>) with class or both.
// .npy: the (N, K) values or probabilities, or the (N, K) decisions as int64 with --write class.
// files: as write_predictions (image inputs: a first .csv column `file`).
void write_value_predictions(const std::string& path, PredictWrite what, const std::vector<float>& values,
                             int64_t N, int64_t K, const std::vector<std::string>& names, bool binary,
                             const std::vector<std::string>& files = {});

// The arg-max class of each row of probs (N, C); ties go to the lowest id.
std::vector<int64_t> arg_max_classes(const std::vector<float>& probs, int64_t N, int64_t C);

}  // namespace trainer
