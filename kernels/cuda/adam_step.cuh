// Adam / AdamW / Nadam update over the flat parameter arena on the GPU
// (kernels/cpu/adam_step.cc is the reference).
//   w, g, m, v: (n)  s: StepScalars in device memory (lr, bias corrections, Nadam's mu schedule)
#pragma once

#include <cuda_runtime.h>

#include "lib/backend/backend.h"

namespace trainer::cuda {

void launch_adam_step(const AdamHyper& h, float* w, const float* g, float* m, float* v, int64_t n,
                      StepScalars* s, cudaStream_t stream);

}  // namespace trainer::cuda
