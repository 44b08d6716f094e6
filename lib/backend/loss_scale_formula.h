// Dynamic loss scaling's update rule, torch.amp.GradScaler's, callable on the host and in CUDA
// kernels so that both backends change the scale at the same steps to the same value.
//   overflow:  scale *= backoff, the good-step count restarts, the step is counted as skipped
//   otherwise: after growth_interval good steps in a row, scale *= growth (unless that would
//              overflow fp32 itself) and the count restarts
// A fixed scale (dynamic false) only counts its overflow steps.
#pragma once

#include <cstdint>

#include "lib/backend/step_kernels.h"
#include "lib/core/host_device.h"

namespace trainer {

TRAINER_HD void loss_scale_update(const LossScaleHyper& h, LossScaleState& st, bool overflow) {
  if (overflow) st.overflow_steps += 1;
  if (!h.dynamic) return;
  if (overflow) {
    st.scale = mul_rn(st.scale, h.backoff);
    st.good_steps = 0;
  } else if (int64_t(++st.good_steps) >= h.growth_interval) {
    const float grown = mul_rn(st.scale, h.growth);
    if (grown <= 3.0e38f) st.scale = grown;  // finite: 2^127 is the largest power of two
    st.good_steps = 0;
  } else {
    return;
  }
  st.inv_scale = div_rn(1.f, st.scale);
}

}  // namespace trainer
