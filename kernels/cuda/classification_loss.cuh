// nll and sparse categorical crossentropy on the GPU (kernels/cpu/classification_loss.cc is the
// reference).  out, dout: (B, C)  labels: (B)  loss_sum: one float in device memory
#pragma once

#include <cuda_runtime.h>

#include "lib/backend/backend.h"

namespace trainer::cuda {

// dout = d(mean loss)/d(out); *loss_sum += the batch's summed loss. Deterministic (one block).
// smoothing: label smoothing (Backend::loss).
void launch_classification_loss(LossKind kind, const float* out, const int32_t* labels, int64_t batch,
                                int64_t classes, float* dout, float* loss_sum, float smoothing,
                                cudaStream_t stream);

}  // namespace trainer::cuda
