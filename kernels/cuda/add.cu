// Element-wise sums (see add.cuh): grid-stride loops, one element per thread per step; the same
// order of additions as the CPU's (input 1 first), so f32 results match it bit for bit.
#include "kernels/cuda/add.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/launch.cuh"

namespace trainer::cuda {
namespace {

template <class T>
__global__ void add_kernel(const T* a, const T* b, T* y, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) y[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[i]));
}

}  // namespace

void launch_add(DType t, const void* a, const void* b, void* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    add_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(a), static_cast<const T*>(b),
                                                        static_cast<T*>(y), n);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
