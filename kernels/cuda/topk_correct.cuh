// correct += #samples whose label ranks among the k largest outputs, on the GPU.  out: (B, C)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace trainer::cuda {

void launch_topk_correct(const float* out, const int32_t* labels, int64_t batch, int64_t classes, int64_t k,
                         float* correct, cudaStream_t stream);

}  // namespace trainer::cuda
