// dtype conversions (see convert.cuh): one grid-stride kernel per (destination, source) type pair.
#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/launch.cuh"

namespace trainer::cuda {
namespace {

template <class D, class S>
__global__ void convert_kernel(D* dst, const S* src, int64_t n, bool accumulate) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float v = to_f32(src[i]);
    dst[i] = from_f32<D>(accumulate ? to_f32(dst[i]) + v : v);
  }
}

template <class D>
__global__ void convert_scaled_kernel(D* dst, const float* src, const float* scale, int64_t n) {
  const float k = scale ? *scale : 1.f;
  for (int64_t i = global_index(); i < n; i += grid_stride()) dst[i] = from_f32<D>(src[i] * k);
}

}  // namespace

void launch_convert_scaled(void* dst, DType dst_type, const float* src, const float* scale, int64_t n,
                           cudaStream_t stream) {
  if (n <= 0) return;
  with_dtype(dst_type, [&](auto d) {
    using D = decltype(d);
    convert_scaled_kernel<D><<<grid_for(n), kThreads, 0, stream>>>(static_cast<D*>(dst), src, scale, n);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_convert(void* dst, DType dst_type, const void* src, DType src_type, int64_t n, bool accumulate,
                    cudaStream_t stream) {
  if (n <= 0) return;
  if (dst_type == src_type && !accumulate) {
    CUDA_CHECK(
        cudaMemcpyAsync(dst, src, size_t(n) * dtype_bytes(dst_type), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  with_dtype(dst_type, [&](auto d) {
    using D = decltype(d);
    with_dtype(src_type, [&](auto s) {
      using S = decltype(s);
      convert_kernel<D, S><<<grid_for(n), kThreads, 0, stream>>>(static_cast<D*>(dst),
                                                                 static_cast<const S*>(src), n, accumulate);
    });
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
