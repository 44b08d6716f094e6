// Zero padding and its gradient (cropping), one thread per output element.
//   x, dx: (B, C, H, W)  xp, dxp: (B, C, PH, PW)
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/pad2d.cuh"

namespace trainer::cuda {
namespace {

__global__ void pad_kernel(PadGeometry g, const float* x, float* xp) {
  const int64_t ph = g.ph(), pw = g.pw(), n = g.planes * ph * pw;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const int64_t c = i % pw, r = (i / pw) % ph, plane = i / (pw * ph);
    const int64_t h = r - g.top, w = c - g.left;
    xp[i] = (h >= 0 && h < g.h && w >= 0 && w < g.w) ? x[(plane * g.h + h) * g.w + w] : 0.f;
  }
}

__global__ void crop_kernel(PadGeometry g, const float* dxp, float* dx) {
  const int64_t ph = g.ph(), pw = g.pw(), n = g.planes * g.h * g.w;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const int64_t w = i % g.w, h = (i / g.w) % g.h, plane = i / (g.w * g.h);
    dx[i] = dxp[(plane * ph + h + g.top) * pw + w + g.left];
  }
}

}  // namespace

void launch_pad2d(const PadGeometry& g, const float* x, float* xp, cudaStream_t stream) {
  const int64_t n = g.planes * g.ph() * g.pw();
  if (n <= 0) return;
  pad_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, x, xp);
  CUDA_CHECK_LAUNCH();
}

void launch_crop2d(const PadGeometry& g, const float* dxp, float* dx, cudaStream_t stream) {
  const int64_t n = g.planes * g.h * g.w;
  if (n <= 0) return;
  crop_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, dxp, dx);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
