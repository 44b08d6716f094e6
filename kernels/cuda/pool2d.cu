// Pooling kernels. cuDNN pooling only takes symmetric padding and leaves the max-pool tie rule of
// its backward unspecified, so both directions are written here instead:
//   forward: one thread per output; max keeps the first maximum (strict >) of the in-bounds
//            window and stores its position; avg divides by the in-bounds count (oneDNN's
//            avg_exclude_padding, Keras' and PyTorch's count_include_pad=False).
//   backward: one thread per input, gathering over the outputs whose window covers it, in a
//            fixed order: deterministic, and it overwrites dx. Windows that tile the input
//            (stride = kernel, no padding: the usual 2x2 pool, also in floor mode) take a faster
//            path in both directions, with 32-bit index arithmetic (the gather's 64-bit divisions
//            made VGG's first pool backward 110 us on an H100): backward, one thread per output
//            writes its whole window, each input written once (the last outputs also the zeros
//            of the rows and columns past the last window); forward, the same arithmetic as the
//            generic kernel in the same order.
//   With a fused relu (g.relu) the forward stores relu of the pooled value and the backward reads
//   each output's gradient through the relu's mask (z > 0) from the stored output.
//   x, dx: (B, C, H, W)  y, dy, argmax: (B, C, OH, OW); x, y, dx, dy of one dtype (f32, bf16,
//   fp16), compared and summed in f32.
#include <cfloat>

#include "kernels/cuda/channel_packs.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/pool2d.cuh"
#include "lib/core/relu_formula.h"

namespace trainer::cuda {
namespace {

// Value i in storage order over (sample, channel, position) with `positions` positions a plane:
// NCHW stores (B, C, P), NHWC (B, P, C).
__device__ __forceinline__ void decompose(const PoolGeometry& g, int64_t i, int64_t positions,
                                          int64_t& sample, int64_t& c, int64_t& pos) {
  if (g.channels_last) {
    c = i % g.channels;
    pos = (i / g.channels) % positions;
    sample = i / (g.channels * positions);
  } else {
    pos = i % positions;
    c = (i / positions) % g.channels;
    sample = i / (g.channels * positions);
  }
}
// The storage index of (sample, c, pos).
__device__ __forceinline__ int64_t offset(const PoolGeometry& g, int64_t sample, int64_t c, int64_t positions,
                                          int64_t pos) {
  return g.channels_last ? (sample * positions + pos) * g.channels + c
                         : (sample * g.channels + c) * positions + pos;
}

// Output o's gradient d, through the fused relu's mask when there is one.
template <class T>
__device__ __forceinline__ float through_relu(const PoolGeometry& g, const T* z, int64_t o, float d) {
  return g.relu ? relu_grad_from_output(to_f32(z[o]), d) : d;
}

// The in-bounds extent [begin, end) of output position o's window along one dimension.
__device__ __forceinline__ void window(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t in,
                                       int64_t& begin, int64_t& end) {
  const int64_t start = o * stride - pad;
  begin = start < 0 ? 0 : start;
  end = start + k < in ? start + k : in;
}

template <class T>
__global__ void pool_forward_kernel(PoolGeometry g, const T* x, T* y, int32_t* argmax) {
  const int64_t n = g.batch * g.channels * g.oh * g.ow;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    int64_t sample, c, opos;
    decompose(g, i, g.oh * g.ow, sample, c, opos);
    const int64_t ow = opos % g.ow, oh = opos / g.ow;
    // The input plane of the same (sample, channel): position p at xp[p * cs].
    const T* xp = x + offset(g, sample, c, g.h * g.w, 0);
    const int64_t cs = g.channels_last ? g.channels : 1;
    int64_t h0, h1, w0, w1;
    window(oh, g.sh, g.pad_top, g.kh, g.h, h0, h1);
    window(ow, g.sw, g.pad_left, g.kw, g.w, w0, w1);
    if (g.max) {
      float best = -FLT_MAX;
      int32_t best_at = -1;
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t w = w0; w < w1; ++w) {
          const float v = to_f32(xp[(h * g.w + w) * cs]);
          if (best_at < 0 || v > best) {
            best = v;
            best_at = int32_t(h * g.w + w);
          }
        }
      const float v = best_at < 0 ? 0.f : best;
      y[i] = from_f32<T>(g.relu ? relu_forward(v) : v);
      argmax[i] = best_at;
    } else {
      float sum = 0.f;
      for (int64_t h = h0; h < h1; ++h)
        for (int64_t w = w0; w < w1; ++w) sum += to_f32(xp[(h * g.w + w) * cs]);
      const int64_t count = (h1 - h0) * (w1 - w0);
      const float v = count > 0 ? sum / float(count) : 0.f;
      y[i] = from_f32<T>(g.relu ? relu_forward(v) : v);
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

template <class T>
__global__ void pool_backward_kernel(PoolGeometry g, const T* dy, const T* z, const int32_t* argmax, T* dx) {
  const int64_t n = g.batch * g.channels * g.h * g.w;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    int64_t sample, c, ipos;
    decompose(g, i, g.h * g.w, sample, c, ipos);
    const int64_t w = ipos % g.w, h = ipos / g.w;
    int64_t oh0, oh1, ow0, ow1;
    covering(h, g.sh, g.pad_top, g.kh, g.oh, oh0, oh1);
    covering(w, g.sw, g.pad_left, g.kw, g.ow, ow0, ow1);
    float acc = 0.f;
    const int32_t me = int32_t(h * g.w + w);
    for (int64_t oh = oh0; oh <= oh1; ++oh)
      for (int64_t ow = ow0; ow <= ow1; ++ow) {
        const int64_t o = offset(g, sample, c, g.oh * g.ow, oh * g.ow + ow);
        if (g.max) {
          if (argmax[o] == me) acc += through_relu(g, z, o, to_f32(dy[o]));
        } else {
          int64_t h0, h1, w0, w1;
          window(oh, g.sh, g.pad_top, g.kh, g.h, h0, h1);
          window(ow, g.sw, g.pad_left, g.kw, g.w, w0, w1);
          acc += through_relu(g, z, o, to_f32(dy[o])) / float((h1 - h0) * (w1 - w0));
        }
      }
    dx[i] = from_f32<T>(acc);
  }
}

// The tiling case (stride = window, no padding): output o's window is rows [oh kh, oh kh + kh),
// columns [ow kw, ow kw + kw); rows and columns past the last window (floor mode: a 13-wide input
// pooled by 2) belong to no window. 32-bit index arithmetic.
// Channels-last, outputs may come n channels at a time (a pack: pool_*_tiled_pack_kernel): o is
// then the index of n channels of one output position, and plane the first one's.
struct TiledOut {
  uint32_t oh, ow;
  size_t plane;  // offset of the input plane (sample, channel): element (h, w) at plane + (h W + w) cs
  uint32_t cs;   // channel stride: 1 (NCHW) or C (NHWC)
};
__device__ __forceinline__ TiledOut tiled_out(const PoolGeometry& g, uint32_t o, uint32_t n = 1) {
  const uint32_t ow_n = uint32_t(g.ow), oh_n = uint32_t(g.oh), hw = uint32_t(g.h) * uint32_t(g.w);
  TiledOut t;
  if (g.channels_last) {  // o = ((sample oh_n + oh) ow_n + ow) C / n + c / n
    const uint32_t ch = uint32_t(g.channels), units = ch / n, c = o % units, rest = o / units;
    t.ow = rest % ow_n;
    t.oh = (rest / ow_n) % oh_n;
    t.plane = size_t(rest / (ow_n * oh_n)) * hw * ch + c * n;
    t.cs = ch;
  } else {
    t.ow = o % ow_n;
    const uint32_t rest = o / ow_n;
    t.oh = rest % oh_n;
    t.plane = size_t(rest / oh_n) * hw;
    t.cs = 1;
  }
  return t;
}

// Forward in the tiling case: one thread per output, the same comparisons and sums in the same
// order as pool_forward_kernel (the generic kernel's 64-bit divisions dominated a small pool).
template <class T>
__global__ void pool_forward_tiled_kernel(PoolGeometry g, const T* x, T* y, int32_t* argmax, uint32_t n_out) {
  const uint32_t w = uint32_t(g.w), kh = uint32_t(g.kh), kw = uint32_t(g.kw);
  for (uint32_t o = blockIdx.x * blockDim.x + threadIdx.x; o < n_out; o += gridDim.x * blockDim.x) {
    const TiledOut t = tiled_out(g, o);
    const T* xp = x + t.plane;
    float v;
    if (g.max) {
      float best = -FLT_MAX;
      int32_t best_at = -1;
      for (uint32_t a = 0; a < kh; ++a)
        for (uint32_t b = 0; b < kw; ++b) {
          const uint32_t idx = (t.oh * kh + a) * w + t.ow * kw + b;
          const float u = to_f32(xp[size_t(idx) * t.cs]);
          if (best_at < 0 || u > best) {
            best = u;
            best_at = int32_t(idx);
          }
        }
      v = best;
      argmax[o] = best_at;
    } else {
      float sum = 0.f;
      for (uint32_t a = 0; a < kh; ++a)
        for (uint32_t b = 0; b < kw; ++b)
          sum += to_f32(xp[size_t((t.oh * kh + a) * w + t.ow * kw + b) * t.cs]);
      v = sum / float(kh * kw);
    }
    y[o] = from_f32<T>(g.relu ? relu_forward(v) : v);
  }
}

// The inputs output (oh, ow) writes in the tiling case's backward: its window, and for the last
// row and column of outputs also the rows and columns past the last window (floor mode), each
// input once: f(idx = h W + w, inside its window).
template <class F>
__device__ __forceinline__ void for_tiled_window(const PoolGeometry& g, uint32_t oh, uint32_t ow, F&& f) {
  const uint32_t kh = uint32_t(g.kh), kw = uint32_t(g.kw), w = uint32_t(g.w);
  const uint32_t r0 = oh * kh, c0 = ow * kw;
  const uint32_t r1 = oh + 1 == uint32_t(g.oh) ? uint32_t(g.h) : r0 + kh;
  const uint32_t c1 = ow + 1 == uint32_t(g.ow) ? w : c0 + kw;
  for (uint32_t r = r0; r < r1; ++r)
    for (uint32_t c = c0; c < c1; ++c) f(r * w + c, r < r0 + kh && c < c0 + kw);
}

// Backward in the tiling case: each output writes its window (the last row and column of
// outputs also the zeros past the last window), each input written once.
template <class T>
__global__ void pool_backward_tiled_kernel(PoolGeometry g, const T* dy, const T* z, const int32_t* argmax,
                                           T* dx, uint32_t n_out) {
  const float count = float(g.kh * g.kw);
  for (uint32_t o = blockIdx.x * blockDim.x + threadIdx.x; o < n_out; o += gridDim.x * blockDim.x) {
    const TiledOut t = tiled_out(g, o);
    T* dxp = dx + t.plane;
    const float d = through_relu(g, z, o, to_f32(dy[o]));
    const int32_t at = g.max ? argmax[o] : -1;
    const float share = g.max ? 0.f : d / count;
    for_tiled_window(g, t.oh, t.ow, [&](uint32_t idx, bool inside) {
      dxp[size_t(idx) * t.cs] = from_f32<T>(!inside ? 0.f : g.max ? (int32_t(idx) == at ? d : 0.f) : share);
    });
  }
}

// The tiling case channels-last by packs (channel_packs.cuh): one thread per output position and
// pack of channels (tiled_out with n = kPack<T>), the same comparisons, sums and writes as the two
// kernels above, value by value.
template <class T>
__global__ void pool_forward_tiled_pack_kernel(PoolGeometry g, const T* x, T* y, int32_t* argmax,
                                               uint32_t packs) {
  constexpr int N = kPack<T>;
  const uint32_t w = uint32_t(g.w), kh = uint32_t(g.kh), kw = uint32_t(g.kw), C = uint32_t(g.channels);
  for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < packs; q += gridDim.x * blockDim.x) {
    const TiledOut t = tiled_out(g, q, N);
    const T* xp = x + t.plane;
    float v[N];
    int32_t at[N];
    for (int k = 0; k < N; ++k) {
      v[k] = g.max ? -FLT_MAX : 0.f;
      at[k] = -1;
    }
    for (uint32_t a = 0; a < kh; ++a)
      for (uint32_t b = 0; b < kw; ++b) {
        const uint32_t idx = (t.oh * kh + a) * w + t.ow * kw + b;
        const Pack<T> in = load_pack(xp + size_t(idx) * C);
#pragma unroll
        for (int k = 0; k < N; ++k) {
          const float u = to_f32(in.v[k]);
          if (!g.max) {
            v[k] += u;
          } else if (at[k] < 0 || u > v[k]) {
            v[k] = u;
            at[k] = int32_t(idx);
          }
        }
      }
    Pack<T> out;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float r = g.max ? v[k] : v[k] / float(kh * kw);
      out.v[k] = from_f32<T>(g.relu ? relu_forward(r) : r);
    }
    store_pack(y + size_t(q) * N, out);
    if (g.max)
#pragma unroll
      for (int k = 0; k < N; k += 4)
        *reinterpret_cast<int4*>(argmax + size_t(q) * N + k) =
            make_int4(at[k], at[k + 1], at[k + 2], at[k + 3]);
  }
}

template <class T>
__global__ void pool_backward_tiled_pack_kernel(PoolGeometry g, const T* dy, const T* z,
                                                const int32_t* argmax, T* dx, uint32_t packs) {
  constexpr int N = kPack<T>;
  const uint32_t C = uint32_t(g.channels);
  const float count = float(g.kh * g.kw);
  for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < packs; q += gridDim.x * blockDim.x) {
    const TiledOut t = tiled_out(g, q, N);
    T* dxp = dx + t.plane;
    const Pack<T> dv = load_pack(dy + size_t(q) * N);
    Pack<T> zv;
    if (g.relu) zv = load_pack(z + size_t(q) * N);
    float d[N];
    int32_t at[N];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      d[k] = to_f32(dv.v[k]);
      if (g.relu) d[k] = relu_grad_from_output(to_f32(zv.v[k]), d[k]);
      if (!g.max) d[k] = d[k] / count;
      at[k] = -1;
    }
    if (g.max)
#pragma unroll
      for (int k = 0; k < N; k += 4) {
        const int4 a = *reinterpret_cast<const int4*>(argmax + size_t(q) * N + k);
        at[k] = a.x;
        at[k + 1] = a.y;
        at[k + 2] = a.z;
        at[k + 3] = a.w;
      }
    for_tiled_window(g, t.oh, t.ow, [&](uint32_t idx, bool inside) {
      Pack<T> out;
#pragma unroll
      for (int k = 0; k < N; ++k)
        out.v[k] = from_f32<T>(!inside ? 0.f : g.max ? (int32_t(idx) == at[k] ? d[k] : 0.f) : d[k]);
      store_pack(dxp + size_t(idx) * C, out);
    });
  }
}

}  // namespace

namespace {

// Stride = window, no padding, at least one output each way, 32-bit indices: the tiled kernels.
bool tiles(const PoolGeometry& g) {
  return g.kh == g.sh && g.kw == g.sw && g.pad_top == 0 && g.pad_left == 0 && g.oh >= 1 && g.ow >= 1 &&
         g.oh * g.sh <= g.h && g.ow * g.sw <= g.w && g.batch * g.channels * g.h * g.w < (int64_t(1) << 31);
}

}  // namespace

void launch_pool2d_forward(const PoolGeometry& g, DType t, const void* x, void* y, int32_t* argmax,
                           cudaStream_t stream) {
  const int64_t n = g.batch * g.channels * g.oh * g.ow;
  if (n <= 0) return;
  if (tiles(g)) {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      if (g.channels_last && packs_fit<T>(g.channels, {x, y, g.max ? argmax : nullptr}))
        pool_forward_tiled_pack_kernel<T><<<grid_for(n / kPack<T>), kThreads, 0, stream>>>(
            g, static_cast<const T*>(x), static_cast<T*>(y), argmax, uint32_t(n / kPack<T>));
      else
        pool_forward_tiled_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
            g, static_cast<const T*>(x), static_cast<T*>(y), argmax, uint32_t(n));
    });
    CUDA_CHECK_LAUNCH();
    return;
  }
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    pool_forward_kernel<T>
        <<<grid_for(n), kThreads, 0, stream>>>(g, static_cast<const T*>(x), static_cast<T*>(y), argmax);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_pool2d_backward(const PoolGeometry& g, DType t, const void* dy, const void* z,
                            const int32_t* argmax, void* dx, cudaStream_t stream) {
  const int64_t n = g.batch * g.channels * g.h * g.w;
  if (n <= 0) return;
  if (tiles(g)) {
    const int64_t n_out = g.batch * g.channels * g.oh * g.ow;
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      const T *dyt = static_cast<const T*>(dy), *zt = static_cast<const T*>(z);
      if (g.channels_last &&
          packs_fit<T>(g.channels, {dy, g.relu ? z : nullptr, g.max ? argmax : nullptr, dx}))
        pool_backward_tiled_pack_kernel<T><<<grid_for(n_out / kPack<T>), kThreads, 0, stream>>>(
            g, dyt, zt, argmax, static_cast<T*>(dx), uint32_t(n_out / kPack<T>));
      else
        pool_backward_tiled_kernel<T><<<grid_for(n_out), kThreads, 0, stream>>>(
            g, dyt, zt, argmax, static_cast<T*>(dx), uint32_t(n_out));
    });
    CUDA_CHECK_LAUNCH();
    return;
  }
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    pool_backward_kernel<T><<<grid_for(n), kThreads, 0, stream>>>(
        g, static_cast<const T*>(dy), static_cast<const T*>(z), argmax, static_cast<T*>(dx));
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
