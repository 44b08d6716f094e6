// correct += #samples whose label ranks among the k largest outputs. out: (B, C)
// A class ranks above the label when its output is strictly larger, or equal with a lower index.
#include "kernels/cpu/cpu_ops.h"

namespace trainer::cpu {

void topk_correct(const float* out, const int32_t* labels, int64_t batch, int64_t classes, int64_t k,
                  float* correct) {
  float hits = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const float* o = out + i * classes;
    const int32_t y = labels[i];
    int64_t above = 0;
    for (int64_t c = 0; c < classes; ++c) above += (o[c] > o[y]) || (o[c] == o[y] && c < y);
    hits += above < k ? 1.f : 0.f;
  }
  *correct += hits;
}

}  // namespace trainer::cpu
