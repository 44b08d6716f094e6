// Zero padding and its gradient (cropping), one thread per output element.
//   x, dx: (B, C, H, W)  xp, dxp: (B, C, PH, PW)
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/pad2d.cuh"

namespace trainer::cuda {
namespace {

template <class T>
__global__ void pad_kernel(PadGeometry g, const T* x, T* xp) {
  const int64_t ph = g.ph(), pw = g.pw(), n = g.planes * ph * pw * g.inner;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const int64_t k = i % g.inner, pos = i / g.inner;
    const int64_t c = pos % pw, r = (pos / pw) % ph, plane = pos / (pw * ph);
    const int64_t h = r - g.top, w = c - g.left;
    xp[i] = (h >= 0 && h < g.h && w >= 0 && w < g.w) ? x[((plane * g.h + h) * g.w + w) * g.inner + k]
                                                     : from_f32<T>(0.f);
  }
}

template <class T>
__global__ void crop_kernel(PadGeometry g, const T* dxp, T* dx) {
  const int64_t ph = g.ph(), pw = g.pw(), n = g.planes * g.h * g.w * g.inner;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const int64_t k = i % g.inner, pos = i / g.inner;
    const int64_t w = pos % g.w, h = (pos / g.w) % g.h, plane = pos / (g.w * g.h);
    dx[i] = dxp[((plane * ph + h + g.top) * pw + w + g.left) * g.inner + k];
  }
}

}  // namespace

void launch_pad2d(const PadGeometry& g, DType t, const void* x, void* xp, cudaStream_t stream) {
  const int64_t n = g.planes * g.ph() * g.pw() * g.inner;
  if (n <= 0) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    pad_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(g, static_cast<const T*>(x), static_cast<T*>(xp));
  });
  CUDA_CHECK_LAUNCH();
}

void launch_crop2d(const PadGeometry& g, DType t, const void* dxp, void* dx, cudaStream_t stream) {
  const int64_t n = g.planes * g.h * g.w * g.inner;
  if (n <= 0) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    crop_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(g, static_cast<const T*>(dxp), static_cast<T*>(dx));
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
