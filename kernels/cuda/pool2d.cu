// Pooling kernels. cuDNN pooling only takes symmetric padding and leaves the max-pool tie rule of
// its backward unspecified, so both directions are written here instead:
//   forward: one thread per output; max keeps the first maximum (strict >) of the in-bounds
//            window and stores its position; avg divides by the in-bounds count (oneDNN's
//            avg_exclude_padding, Keras' and PyTorch's count_include_pad=False).
//   backward: one thread per input, gathering over the outputs whose window covers it, in a
//            fixed order: deterministic, and it overwrites dx.
//   x, dx: (B, C, H, W)  y, dy, argmax: (B, C, OH, OW)
#include <cfloat>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/pool2d.cuh"

namespace trainer::cuda {
namespace {

// The in-bounds extent [begin, end) of output position o's window along one dimension.
__device__ __forceinline__ void window(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t in,
                                       int64_t& begin, int64_t& end) {
  const int64_t start = o * stride - pad;
  begin = start < 0 ? 0 : start;
  end = start + k < in ? start + k : in;
}

__global__ void pool_forward_kernel(PoolGeometry g, const float* x, float* y, int32_t* argmax) {
  const int64_t n = g.batch * g.channels * g.oh * g.ow;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const int64_t ow = i % g.ow, oh = (i / g.ow) % g.oh, plane = i / (g.ow * g.oh);
    const float* xp = x + plane * g.h * g.w;
    int64_t h0, h1, w0, w1;
    window(oh, g.sh, g.pad_top, g.kh, g.h, h0, h1);
    window(ow, g.sw, g.pad_left, g.kw, g.w, w0, w1);
    if (g.max) {
      float best = -FLT_MAX;
      int32_t best_at = -1;
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t w = w0; w < w1; ++w) {
          const float v = xp[h * g.w + w];
          if (best_at < 0 || v > best) {
            best = v;
            best_at = int32_t(h * g.w + w);
          }
        }
      y[i] = best_at < 0 ? 0.f : best;
      argmax[i] = best_at;
    } else {
      float sum = 0.f;
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t w = w0; w < w1; ++w) sum += xp[h * g.w + w];
      const int64_t count = (h1 - h0) * (w1 - w0);
      y[i] = count > 0 ? sum / float(count) : 0.f;
    }
  }
}

// Output positions along one dimension whose window covers input position `at`.
__device__ __forceinline__ void covering(int64_t at, int64_t stride, int64_t pad, int64_t k, int64_t out,
                                         int64_t& first, int64_t& last) {
  const int64_t lo = at + pad - k + 1;
  first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  const int64_t hi = (at + pad) / stride;
  last = hi < out - 1 ? hi : out - 1;
}

__global__ void pool_backward_kernel(PoolGeometry g, const float* dy, const int32_t* argmax, float* dx) {
  const int64_t n = g.batch * g.channels * g.h * g.w;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const int64_t w = i % g.w, h = (i / g.w) % g.h, plane = i / (g.w * g.h);
    const int64_t out_plane = plane * g.oh * g.ow;
    int64_t oh0, oh1, ow0, ow1;
    covering(h, g.sh, g.pad_top, g.kh, g.oh, oh0, oh1);
    covering(w, g.sw, g.pad_left, g.kw, g.ow, ow0, ow1);
    float acc = 0.f;
    const int32_t me = int32_t(h * g.w + w);
    for (int64_t oh = oh0; oh <= oh1; ++oh)
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const int64_t o = out_plane + oh * g.ow + ow;
        if (g.max) {
          if (argmax[o] == me) acc += dy[o];
        } else {
          int64_t h0, h1, w0, w1;
          window(oh, g.sh, g.pad_top, g.kh, g.h, h0, h1);
          window(ow, g.sw, g.pad_left, g.kw, g.w, w0, w1);
          acc += dy[o] / float((h1 - h0) * (w1 - w0));
        }
      }
    dx[i] = acc;
  }
}

}  // namespace

void launch_pool2d_forward(const PoolGeometry& g, const float* x, float* y, int32_t* argmax,
                           cudaStream_t stream) {
  const int64_t n = g.batch * g.channels * g.oh * g.ow;
  if (n <= 0) return;
  pool_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, x, y, argmax);
  CUDA_CHECK_LAUNCH();
}

void launch_pool2d_backward(const PoolGeometry& g, const float* dy, const int32_t* argmax, float* dx,
                            cudaStream_t stream) {
  const int64_t n = g.batch * g.channels * g.h * g.w;
  if (n <= 0) return;
  pool_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(g, dy, argmax, dx);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
