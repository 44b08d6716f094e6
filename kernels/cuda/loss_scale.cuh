// Loss scaling on the GPU (lib/backend/backend.h, LossScaleState; kernels/cpu/loss_scale.cc is the
// reference). Every launcher reads the scale from device memory and writes only device memory, so
// the whole of loss scaling is captured with the step as a CUDA graph and replayed; nothing waits.
//   dout, g: (n) floats  st: LossScaleState  s: StepScalars, all in device memory
#pragma once

#include <cuda_runtime.h>

#include "lib/backend/step_kernels.h"

namespace trainer::cuda {

// dout *= st->scale.
void launch_scale_loss_gradient(float* dout, int64_t n, const LossScaleState* st, cudaStream_t stream);
// g *= st->inv_scale; ORs kGradientOverflow into s->nonfinite when any product is not finite.
void launch_unscale_gradients(float* g, int64_t n, const LossScaleState* st, StepScalars* s,
                              cudaStream_t stream);
// One thread: lib/backend/loss_scale_formula.h.
void launch_update_loss_scale(const LossScaleHyper& h, LossScaleState* st, const StepScalars* s,
                              cudaStream_t stream);

}  // namespace trainer::cuda
