#include "lib/train/divergence.h"

#include <cmath>
#include <cstdio>

#include "lib/backend/step_kernels.h"

namespace trainer {

std::string nonfinite_what(uint32_t bits) {
  std::vector<std::string> parts;
  if (bits & kNonfiniteLoss) parts.push_back("loss");
  if (bits & kNonfiniteGradients) parts.push_back("gradients");
  if (bits & kNonfiniteWeights) parts.push_back("weights");
  if (parts.empty()) return "values";
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i)
    s += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return s;
}

std::string LossGrowthWatch::on_epoch(int64_t epoch, double loss) {
  if (!std::isfinite(loss)) return "";
  if (first_epoch_ == 0) {
    first_ = loss;
    first_epoch_ = epoch;
  }
  if (!warnings_.empty()) return "";
  const bool grew = first_ > 0 && loss > 100.0 * first_;
  if (!grew && !(absolute_ && loss > 1e6)) return "";
  char text[320];
  if (grew)
    std::snprintf(text, sizeof text,
                  "the training loss grew from %.4g (epoch %lld) to %.4g (epoch %lld): the run has probably "
                  "diverged",
                  first_, (long long)first_epoch_, loss, (long long)epoch);
  else
    std::snprintf(text, sizeof text, "the training loss is %.4g at epoch %lld: the run has probably diverged",
                  loss, (long long)epoch);
  warnings_.push_back(text);
  return text;
}

}  // namespace trainer
