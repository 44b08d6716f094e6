// Element-wise maps y[i] = op(x0[i], x1[i], ...) over n elements of f32, bf16 or fp16, computed in
// f32 (add.cu, eltwise.cu). Where every tensor starts 16-byte aligned a thread moves 16 bytes of
// each a step (vec16.cuh: 4 floats, 8 bf16 or fp16) and a scalar kernel takes the tail; 32-bit
// indices where they fit (launch.cuh). Both kernels apply the same op value by value: the same
// bits whichever runs an element. y may be one of the inputs (each element is read before it is
// written, by the same thread).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vec16.cuh"

namespace trainer::cuda {

// The N inputs of a map, passed by value as a kernel argument.
template <int N>
struct MapInputs {
  const void* p[N];
};

namespace map_detail {

template <int N, class Op>
__device__ __forceinline__ float apply(const Op& op, const float (&v)[N]) {
  static_assert(N == 1 || N == 2, "maps of one or two inputs");
  if constexpr (N == 1)
    return op(v[0]);
  else
    return op(v[0], v[1]);
}

// Elements [first, n), one a thread a step.
template <class T, class I, int N, class Op>
__global__ void map_kernel(MapInputs<N> in, T* y, I first, I n, Op op) {
  for (I i = first + I(global_index()); i < n; i += I(grid_stride())) {
    float v[N];
#pragma unroll
    for (int k = 0; k < N; ++k) v[k] = to_f32(static_cast<const T*>(in.p[k])[i]);
    y[i] = from_f32<T>(apply<N>(op, v));
  }
}

// Vectors [0, nv) of kVec<T> elements, 16 bytes of each input a thread a step.
template <class T, class I, int N, class Op>
__global__ void map_vec_kernel(MapInputs<N> in, uint4* y, I nv, Op op) {
  constexpr int V = kVec<T>;
  for (I i = I(global_index()); i < nv; i += I(grid_stride())) {
    float u[N][V];
#pragma unroll
    for (int k = 0; k < N; ++k) unpack<T>(static_cast<const uint4*>(in.p[k])[i], u[k]);
    float r[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      float v[N];
#pragma unroll
      for (int k = 0; k < N; ++k) v[k] = u[k][j];
      r[j] = apply<N>(op, v);
    }
    y[i] = pack<T>(r);
  }
}

}  // namespace map_detail

// y = op(in...) over n elements of T (none for n <= 0). op: a copyable functor with a __device__ float
// operator() of N floats. Launches only; the caller checks the launch (CUDA_CHECK_LAUNCH).
template <class T, int N, class Op>
void launch_map(MapInputs<N> in, void* y, int64_t n, Op op, cudaStream_t stream) {
  if (n <= 0) return;
  constexpr int V = kVec<T>;
  bool aligned = aligned16(y);
  for (const void* p : in.p) aligned = aligned && aligned16(p);
  const int64_t nv = aligned ? n / V : 0;
  with_index_type({n}, [&](auto index) {
    using I = decltype(index);
    if (nv > 0)
      map_detail::map_vec_kernel<T, I, N, Op>
          <<<grid_for(nv), kThreads, 0, stream>>>(in, static_cast<uint4*>(y), I(nv), op);
    if (nv * V < n)
      map_detail::map_kernel<T, I, N, Op>
          <<<grid_for(n - nv * V), kThreads, 0, stream>>>(in, static_cast<T*>(y), I(nv * V), I(n), op);
  });
}

}  // namespace trainer::cuda
