// Confusion matrix accumulation: one thread per sample finds argmax (ties to the lowest index, as
// the CPU, torch.argmax and numpy) and adds 1 atomically. Adding 1.0f is exact below 2^24 per
// cell, so the result does not depend on the order of the atomics.
//   out: (B, C)  labels: (B)  confusion: (C, C), row = label
#include "kernels/cuda/confusion_accumulate.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"

namespace trainer::cuda {
namespace {

__global__ void confusion_kernel(const float* out, const int32_t* labels, int64_t batch, int64_t classes,
                                 float* confusion) {
  for (int64_t i = global_index(); i < batch; i += grid_stride()) {
    const float* o = out + i * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (o[c] > o[best]) best = c;
    atomicAdd(confusion + int64_t(labels[i]) * classes + best, 1.f);
  }
}

}  // namespace

void launch_confusion_accumulate(const float* out, const int32_t* labels, int64_t batch, int64_t classes,
                                 float* confusion, cudaStream_t stream) {
  if (batch <= 0) return;
  confusion_kernel<<<grid_for(batch), kThreads, 0, stream>>>(out, labels, batch, classes, confusion);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
