// Element-wise sums (see add.cuh): grid-stride loops; the same order of additions as the CPU's
// (input 1 first), so f32 results match it bit for bit. Where a, b and y start 16-byte aligned a
// thread moves 16 bytes of each a step (8 bf16 or fp16, 4 floats; the scalar kernel takes the
// tail): one 16-bit element a thread a step moved 2 bytes a load (GPT-2 small's residual adds,
// (8192, 768) bf16: 15 us each on an H200).
#include <cstdint>

#include "kernels/cuda/add.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vec16.cuh"

namespace trainer::cuda {
namespace {

template <class T, class I>
__global__ void add_kernel(const T* a, const T* b, T* y, I first, I n) {
  for (I i = first + I(global_index()); i < n; i += I(grid_stride()))
    y[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[i]));
}

// Vectors [0, nv) of kVec<T> elements.
template <class T, class I>
__global__ void add_vec_kernel(const uint4* a, const uint4* b, uint4* y, I nv) {
  constexpr int V = kVec<T>;
  for (I i = I(global_index()); i < nv; i += I(grid_stride())) {
    float u[V], v[V];
    unpack<T>(a[i], u);
    unpack<T>(b[i], v);
#pragma unroll
    for (int j = 0; j < V; ++j) u[j] += v[j];
    y[i] = pack<T>(u);
  }
}

}  // namespace

void launch_add(DType t, const void* a, const void* b, void* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = kVec<T>;
    const T *at = static_cast<const T*>(a), *bt = static_cast<const T*>(b);
    T* yt = static_cast<T*>(y);
    const int64_t nv = aligned16(a) && aligned16(b) && aligned16(y) ? n / V : 0;
    with_index_type({n}, [&](auto index) {
      using I = decltype(index);
      if (nv > 0)
        add_vec_kernel<T, I><<<grid_for(nv), kThreads, 0, stream>>>(reinterpret_cast<const uint4*>(at),
                                                                    reinterpret_cast<const uint4*>(bt),
                                                                    reinterpret_cast<uint4*>(yt), I(nv));
      if (nv * V < n)
        add_kernel<T, I><<<grid_for(n - nv * V), kThreads, 0, stream>>>(at, bt, yt, I(nv * V), I(n));
    });
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
