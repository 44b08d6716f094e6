// confusion[label, argmax(out)] += 1.  out: (B, C)  confusion: (C, C)
// Ties resolve to the lowest class index, as torch.argmax and numpy do.
#include "kernels/cpu/cpu_ops.h"

namespace trainer::cpu {

void confusion_accumulate(const float* out, const int32_t* labels, int64_t batch, int64_t classes,
                          float* confusion) {
  for (int64_t i = 0; i < batch; ++i) {
    const float* o = out + i * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (o[c] > o[best]) best = c;
    confusion[labels[i] * classes + best] += 1.f;
  }
}

}  // namespace trainer::cpu
