// The non-finite guard on the CPU (lib/backend/step_kernels.h): the reference for
// kernels/cuda/nonfinite_guard.cu.
//   check_finite: x (n) -> ORs `bit` into s.nonfinite when any element is NaN or infinite
//   commit_step:  adds s.batch_loss to the epoch's loss sum, or records the non-finite step
#include "kernels/cpu/cpu_ops.h"
#include "lib/core/host_device.h"

namespace trainer::cpu {

void check_finite(const float* x, int64_t n, uint32_t bit, StepScalars& s) {
  int bad = 0;
#pragma omp parallel for simd reduction(| : bad) if (n > 65536)
  for (int64_t i = 0; i < n; ++i) bad |= int(nonfinite_bits(x[i]));
  if (bad) s.nonfinite |= bit;
}

void commit_step(const StepScalars& s, int64_t batch, float* loss_sum, NonfiniteRecord& r) {
  const uint32_t what = s.nonfinite & kNonfiniteDiverged;  // a loss-scale overflow is no divergence
  if (what == 0) {
    *loss_sum += s.batch_loss;
    return;
  }
  if (r.steps == 0) {
    r.first_step = s.step + 1;
    r.first_what = what;
  }
  r.steps += 1;
  r.samples += uint64_t(batch);
  r.what |= what;
}

}  // namespace trainer::cpu
