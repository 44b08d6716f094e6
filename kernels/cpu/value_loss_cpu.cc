// The losses on float targets on the CPU (lib/core/value_loss_formula.h): every element's loss
// and gradient in the shared formula, the batch's sum in double in row order, and the metric sums
// per output column formed in double and added to the float accumulators once per batch, so a
// pass's sums do not depend on the thread count.
//   out, dout, targets: (B, K)  sums: K * (kRegressionSums | kBinarySums)
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_kernels.h"
#include "lib/backend/loss_kernel.h"

namespace trainer {
namespace {

bool finite_bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return (u & 0x7f800000u) != 0x7f800000u;
}

class ValueLossCpu : public LossKernel {
 public:
  explicit ValueLossCpu(const LossSpec& s)
      : s_(s), column_sums_(size_t(s.width) * (s.binary_metrics ? kBinarySums : kRegressionSums)) {}

  void run(const LossRun& r) override {
    const float *out = r.out_f32(), *targets = static_cast<const float*>(r.targets);
    const int64_t batch = r.batch;
    float *dout = r.dout_f32(), *loss_sum = r.loss_sum, *sums = r.sums;
    const int64_t K = s_.width;
    const double inv_n = double(s_.scale) / double(batch * K), inv_k = double(s_.scale) / double(K);
    double total = 0;
    std::fill(column_sums_.begin(), column_sums_.end(), 0.0);
    for (int64_t i = 0; i < batch; ++i) {
      double row = 0;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t at = i * K + k;
        const float o = out[at], y = targets[at];
        const float pw =
            s_.pos_weight.empty() ? 1.f : s_.pos_weight[s_.pos_weight.size() == 1 ? 0 : size_t(k)];
        double g = 0;
        row += value_loss_element(s_.formula, o, y, s_.delta, pw, &g);
        dout[at] = float(g * inv_n);
        if (sums) add_metric(k, o, y);
      }
      total += row * inv_k;
    }
    *loss_sum += float(total);
    if (r.guard && !finite_bits(*loss_sum)) r.guard->nonfinite |= r.guard_bit;
    if (sums)
      for (size_t j = 0; j < column_sums_.size(); ++j) sums[j] += float(column_sums_[j]);
  }

 private:
  void add_metric(int64_t k, float o, float y) {
    if (!s_.binary_metrics) {
      double* c = column_sums_.data() + k * kRegressionSums;
      const double e = double(o) - double(y);
      c[0] += e < 0 ? -e : e;
      c[1] += e * e;
      c[2] += double(y);
      c[3] += double(y) * double(y);
      return;
    }
    double* c = column_sums_.data() + k * kBinarySums;
    const bool positive = y >= 0.5f, decided = o > 0.f;
    c[positive ? (decided ? 0 : 2) : (decided ? 1 : 3)] += 1;  // TP, FN / FP, TN
    c[4 + (positive ? 0 : kAucBins) + auc_bin(o)] += 1;
  }

  LossSpec s_;
  std::vector<double> column_sums_;  // one batch's, sized when made
};

}  // namespace

std::unique_ptr<LossKernel> make_value_loss_cpu(const LossSpec& s) {
  return std::make_unique<ValueLossCpu>(s);
}

}  // namespace trainer
