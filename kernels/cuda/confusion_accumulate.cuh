// confusion[label, argmax(out)] += 1 on the GPU.  out: (B, C)  labels: (B)  confusion: (C, C)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace trainer::cuda {

void launch_confusion_accumulate(const float* out, const int32_t* labels, int64_t batch, int64_t classes,
                                 float* confusion, cudaStream_t stream);

}  // namespace trainer::cuda
