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
//            generic kernel in the same order. These keep each maximum's place in its window (row
//            a kw + column b) as one byte where the window has at most 256 values (pool2d_argmax_bytes;
//            VGG's 2x2 pools: a quarter of the int32 index's bytes written and read back), else as
//            an int32.
//   With a fused relu (g.relu) the forward stores relu of the pooled value and the backward reads
//   each output's gradient through the relu's mask (z > 0) from the stored output.
//   x, dx: (B, C, H, W)  y, dy, argmax: (B, C, OH, OW); x, y, dx, dy of one dtype (f32, bf16,
//   fp16), compared and summed in f32.
#include <cfloat>

#include "kernels/cuda/batchnorm_value.cuh"
#include "kernels/cuda/channel_packs.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/pool2d.cuh"
#include "lib/core/error.h"
#include "lib/core/relu_formula.h"

namespace trainer::cuda {
namespace {

// Value i in storage order over (sample, channel, position) with `positions` positions a plane:
// NCHW stores (B, C, P), NHWC (B, P, C). Index arithmetic in I (32 bits where the tensors allow:
// 64-bit divisions made resnet18's 3x3 stride-2 pool backward at 112x112 2.9x PyTorch's time).
template <class I>
__device__ __forceinline__ void decompose(const PoolGeometry& g, I i, I positions, I& sample, I& c, I& pos) {
  const I channels = I(g.channels);
  if (g.channels_last) {
    c = i % channels;
    pos = (i / channels) % positions;
    sample = i / (channels * positions);
  } else {
    pos = i % positions;
    c = (i / positions) % channels;
    sample = i / (channels * positions);
  }
}
// The storage index of (sample, c, pos).
template <class I>
__device__ __forceinline__ I offset(const PoolGeometry& g, I sample, I c, I positions, I pos) {
  const I channels = I(g.channels);
  return g.channels_last ? (sample * positions + pos) * channels + c
                         : (sample * channels + c) * positions + pos;
}

// Output o's gradient d, through the fused relu's mask when there is one.
template <class T, class I>
__device__ __forceinline__ float through_relu(const PoolGeometry& g, const T* z, I o, float d) {
  return g.relu ? relu_grad_from_output(to_f32(z[o]), d) : d;
}

// The in-bounds extent [begin, end) of output position o's window along one dimension.
template <class I>
__device__ __forceinline__ void window(I o, I stride, I pad, I k, I in, I& begin, I& end) {
  const I start = o * stride - pad;
  begin = start < 0 ? 0 : start;
  end = start + k < in ? start + k : in;
}

// The window of output (oh, ow): rows [h0, h1), columns [w0, w1).
template <class I>
struct Window {
  I h0, h1, w0, w1;
  __device__ __forceinline__ Window(const PoolGeometry& g, I oh, I ow) {
    window<I>(oh, I(g.sh), I(g.pad_top), I(g.kh), I(g.h), h0, h1);
    window<I>(ow, I(g.sw), I(g.pad_left), I(g.kw), I(g.w), w0, w1);
  }
  __device__ __forceinline__ I count() const { return (h1 - h0) * (w1 - w0); }
};

template <class T, class I>
__global__ void pool_forward_kernel(PoolGeometry g, const T* x, T* y, int32_t* argmax) {
  const I n = I(g.batch) * I(g.channels) * I(g.oh) * I(g.ow), ow_n = I(g.ow), w_n = I(g.w);
  for (I i = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); i < n; i += I(gridDim.x) * I(blockDim.x)) {
    I sample, c, opos;
    decompose<I>(g, i, I(g.oh) * ow_n, sample, c, opos);
    // The input plane of the same (sample, channel): position p at xp[p * cs].
    const T* xp = x + offset<I>(g, sample, c, I(g.h) * w_n, 0);
    const I cs = g.channels_last ? I(g.channels) : 1;
    const Window<I> win(g, opos / ow_n, opos % ow_n);
    if (g.max) {
      float best = -FLT_MAX;
      int32_t best_at = -1;
      for (I h = win.h0; h < win.h1; ++h)
        for (I w = win.w0; w < win.w1; ++w) {
          const float v = to_f32(xp[(h * w_n + w) * cs]);
          if (best_at < 0 || v > best) {
            best = v;
            best_at = int32_t(h * w_n + w);
          }
        }
      const float v = best_at < 0 ? 0.f : best;
      y[i] = from_f32<T>(g.relu ? relu_forward(v) : v);
      argmax[i] = best_at;
    } else {
      float sum = 0.f;
      for (I h = win.h0; h < win.h1; ++h)
        for (I w = win.w0; w < win.w1; ++w) sum += to_f32(xp[(h * w_n + w) * cs]);
      const I count = win.count();
      const float v = count > 0 ? sum / float(count) : 0.f;
      y[i] = from_f32<T>(g.relu ? relu_forward(v) : v);
    }
  }
}

// Output positions along one dimension whose window covers input position `at`.
template <class I>
__device__ __forceinline__ void covering(I at, I stride, I pad, I k, I out, I& first, I& last) {
  const I lo = at + pad - k + 1;
  first = lo <= 0 ? 0 : (lo + stride - 1) / stride;
  const I hi = (at + pad) / stride;
  last = hi < out - 1 ? hi : out - 1;
}

template <class T, class I>
__global__ void pool_backward_kernel(PoolGeometry g, const T* dy, const T* z, const int32_t* argmax, T* dx) {
  const I n = I(g.batch) * I(g.channels) * I(g.h) * I(g.w), w_n = I(g.w), ow_n = I(g.ow);
  for (I i = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); i < n; i += I(gridDim.x) * I(blockDim.x)) {
    I sample, c, ipos;
    decompose<I>(g, i, I(g.h) * w_n, sample, c, ipos);
    const I w = ipos % w_n, h = ipos / w_n;
    I oh0, oh1, ow0, ow1;
    covering<I>(h, I(g.sh), I(g.pad_top), I(g.kh), I(g.oh), oh0, oh1);
    covering<I>(w, I(g.sw), I(g.pad_left), I(g.kw), ow_n, ow0, ow1);
    float acc = 0.f;
    const int32_t me = int32_t(ipos);
    for (I oh = oh0; oh <= oh1; ++oh)
      for (I ow = ow0; ow <= ow1; ++ow) {
        const I o = offset<I>(g, sample, c, I(g.oh) * ow_n, oh * ow_n + ow);
        if (g.max) {
          if (argmax[o] == me) acc += through_relu(g, z, o, to_f32(dy[o]));
        } else {
          acc += through_relu(g, z, o, to_f32(dy[o])) / float(Window<I>(g, oh, ow).count());
        }
      }
    dx[i] = from_f32<T>(acc);
  }
}

// The generic kernels channels-last by packs (channel_packs.cuh): one thread per position and
// pack of kPack<T> channels, 16-byte loads and stores, the same comparisons and sums in the same
// order value by value. q = (sample, position, pack).
template <class T, class I>
__global__ void pool_forward_pack_kernel(PoolGeometry g, const T* x, T* y, int32_t* argmax, I packs) {
  constexpr int N = kPack<T>;
  const I C = I(g.channels), units = C / N, ow_n = I(g.ow), oh_n = I(g.oh), w_n = I(g.w), hw = I(g.h) * w_n;
  for (I q = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); q < packs; q += I(gridDim.x) * I(blockDim.x)) {
    const I c = (q % units) * N, rest = q / units, opos = rest % (oh_n * ow_n), sample = rest / (oh_n * ow_n);
    const T* xp = x + (sample * hw) * C + c;
    const Window<I> win(g, opos / ow_n, opos % ow_n);
    float v[N];
    int32_t at[N];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      v[k] = g.max ? -FLT_MAX : 0.f;
      at[k] = -1;
    }
    for (I h = win.h0; h < win.h1; ++h)
      for (I w = win.w0; w < win.w1; ++w) {
        const Pack<T> in = load_pack(xp + (h * w_n + w) * C);
#pragma unroll
        for (int k = 0; k < N; ++k) {
          const float u = to_f32(in.v[k]);
          if (!g.max) {
            v[k] += u;
          } else if (at[k] < 0 || u > v[k]) {
            v[k] = u;
            at[k] = int32_t(h * w_n + w);
          }
        }
      }
    const I count = win.count();
    Pack<T> out;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float r = g.max ? (at[k] < 0 ? 0.f : v[k]) : (count > 0 ? v[k] / float(count) : 0.f);
      out.v[k] = from_f32<T>(g.relu ? relu_forward(r) : r);
    }
    store_pack(y + q * N, out);
    if (g.max)
#pragma unroll
      for (int k = 0; k < N; k += 4)
        *reinterpret_cast<int4*>(argmax + q * N + k) = make_int4(at[k], at[k + 1], at[k + 2], at[k + 3]);
  }
}

template <class T, class I>
__global__ void pool_backward_pack_kernel(PoolGeometry g, const T* dy, const T* z, const int32_t* argmax,
                                          T* dx, I packs) {
  constexpr int N = kPack<T>;
  const I C = I(g.channels), units = C / N, ow_n = I(g.ow), oh_n = I(g.oh), w_n = I(g.w), hw = I(g.h) * w_n;
  for (I q = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); q < packs; q += I(gridDim.x) * I(blockDim.x)) {
    const I c = (q % units) * N, rest = q / units, ipos = rest % hw, sample = rest / hw;
    const I w = ipos % w_n, h = ipos / w_n;
    I oh0, oh1, ow0, ow1;
    covering<I>(h, I(g.sh), I(g.pad_top), I(g.kh), oh_n, oh0, oh1);
    covering<I>(w, I(g.sw), I(g.pad_left), I(g.kw), ow_n, ow0, ow1);
    float acc[N];
#pragma unroll
    for (int k = 0; k < N; ++k) acc[k] = 0.f;
    const int32_t me = int32_t(ipos);
    for (I oh = oh0; oh <= oh1; ++oh)
      for (I ow = ow0; ow <= ow1; ++ow) {
        const I o = ((sample * oh_n + oh) * ow_n + ow) * C + c;  // the pack's first value
        const Pack<T> d = load_pack(dy + o);
        Pack<T> zv;
        if (g.relu) zv = load_pack(z + o);
        int32_t at[N];
        if (g.max)
#pragma unroll
          for (int k = 0; k < N; k += 4) {
            const int4 a = *reinterpret_cast<const int4*>(argmax + o + k);
            at[k] = a.x;
            at[k + 1] = a.y;
            at[k + 2] = a.z;
            at[k + 3] = a.w;
          }
        const float count = g.max ? 1.f : float(Window<I>(g, oh, ow).count());
#pragma unroll
        for (int k = 0; k < N; ++k) {
          float dk = to_f32(d.v[k]);
          if (g.relu) dk = relu_grad_from_output(to_f32(zv.v[k]), dk);
          if (!g.max)
            acc[k] += dk / count;
          else if (at[k] == me)
            acc[k] += dk;
        }
      }
    Pack<T> out;
#pragma unroll
    for (int k = 0; k < N; ++k) out.v[k] = from_f32<T>(acc[k]);
    store_pack(dx + q * N, out);
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
template <class T, class A>
__global__ void pool_forward_tiled_kernel(PoolGeometry g, const T* x, T* y, A* argmax, uint32_t n_out) {
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
            best_at = int32_t(a * kw + b);
          }
        }
      v = best;
      argmax[o] = A(best_at);
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
// input once: f(idx = h W + w, inside its window, the place in the window a kw + b where inside).
template <class F>
__device__ __forceinline__ void for_tiled_window(const PoolGeometry& g, uint32_t oh, uint32_t ow, F&& f) {
  const uint32_t kh = uint32_t(g.kh), kw = uint32_t(g.kw), w = uint32_t(g.w);
  const uint32_t r0 = oh * kh, c0 = ow * kw;
  const uint32_t r1 = oh + 1 == uint32_t(g.oh) ? uint32_t(g.h) : r0 + kh;
  const uint32_t c1 = ow + 1 == uint32_t(g.ow) ? w : c0 + kw;
  for (uint32_t r = r0; r < r1; ++r)
    for (uint32_t c = c0; c < c1; ++c)
      f(r * w + c, r < r0 + kh && c < c0 + kw, int32_t((r - r0) * kw + c - c0));
}

// Backward in the tiling case: each output writes its window (the last row and column of
// outputs also the zeros past the last window), each input written once.
template <class T, class A>
__global__ void pool_backward_tiled_kernel(PoolGeometry g, const T* dy, const T* z, const A* argmax, T* dx,
                                           uint32_t n_out) {
  const float count = float(g.kh * g.kw);
  for (uint32_t o = blockIdx.x * blockDim.x + threadIdx.x; o < n_out; o += gridDim.x * blockDim.x) {
    const TiledOut t = tiled_out(g, o);
    T* dxp = dx + t.plane;
    const float d = through_relu(g, z, o, to_f32(dy[o]));
    const int32_t at = g.max ? int32_t(argmax[o]) : -1;
    const float share = g.max ? 0.f : d / count;
    for_tiled_window(g, t.oh, t.ow, [&](uint32_t idx, bool inside, int32_t place) {
      dxp[size_t(idx) * t.cs] = from_f32<T>(!inside ? 0.f : g.max ? (place == at ? d : 0.f) : share);
    });
  }
}

// A pack's argmax places: N of type A moved at once (16 bytes at most: two moves of an int32 pack
// of 8).
template <class A, int N>
struct alignas(sizeof(A) * N < 16 ? sizeof(A) * N : 16) ArgPack {
  A v[N];
};
template <class A, int N>
__device__ __forceinline__ void store_places(A* p, const int32_t (&at)[N]) {
  ArgPack<A, N> a;
#pragma unroll
  for (int k = 0; k < N; ++k) a.v[k] = A(at[k]);
  *reinterpret_cast<ArgPack<A, N>*>(p) = a;
}
template <class A, int N>
__device__ __forceinline__ void load_places(const A* p, int32_t (&at)[N]) {
  const ArgPack<A, N> a = *reinterpret_cast<const ArgPack<A, N>*>(p);
#pragma unroll
  for (int k = 0; k < N; ++k) at[k] = int32_t(a.v[k]);
}

// The tiling case channels-last by packs (channel_packs.cuh): one thread per output position and
// pack of channels (tiled_out with n = kPack<T>), the same comparisons, sums and writes as the two
// kernels above, value by value.
// kBn: x is a batchnorm's input, each value taken as the batchnorm's stored output (bn_value,
// through its fused relu; batchnorm_normalize_pack_kernel's arithmetic) as it is read.
// k2x2: 2 x 2 windows, whose four loads are all issued before the first comparison (VGG's
// 64-channel 32 x 32 pool read its input at 40% of the DRAM bandwidth one load at a time).
template <class T, bool kBn, class A, bool k2x2>
__global__ void pool_forward_tiled_pack_kernel(PoolGeometry g, const T* x, T* y, A* argmax, uint32_t packs,
                                               PoolNormalize bn) {
  constexpr int N = kPack<T>;
  const uint32_t w = uint32_t(g.w), kh = uint32_t(g.kh), kw = uint32_t(g.kw), C = uint32_t(g.channels);
  for (uint32_t q = blockIdx.x * blockDim.x + threadIdx.x; q < packs; q += gridDim.x * blockDim.x) {
    const TiledOut t = tiled_out(g, q, N);
    const T* xp = x + t.plane;
    float v[N];
    int32_t at[N];
    [[maybe_unused]] float m[N], scale[N], shift[N];
    for (int k = 0; k < N; ++k) {
      v[k] = g.max ? -FLT_MAX : 0.f;
      at[k] = -1;
      if constexpr (kBn) {
        const uint32_t c = (q % (C / N)) * N + uint32_t(k);
        m[k] = bn.mean[c];
        scale[k] = bn.gamma[c] * bn.inv[c];
        shift[k] = bn.beta[c];
      }
    }
    // Window value (a, b) in order: the same comparisons and sums either way.
    const auto consider = [&](const Pack<T>& in, uint32_t a, uint32_t b) {
#pragma unroll
      for (int k = 0; k < N; ++k) {
        float u = to_f32(in.v[k]);
        if constexpr (kBn) {
          const T z = bn_value<T>(u, m[k], scale[k], shift[k]);
          u = bn.relu ? to_f32(from_f32<T>(relu_forward(to_f32(z)))) : to_f32(z);
        }
        if (!g.max) {
          v[k] += u;
        } else if (at[k] < 0 || u > v[k]) {
          v[k] = u;
          at[k] = int32_t(a * kw + b);
        }
      }
    };
    if constexpr (k2x2) {
      const T* r0 = xp + size_t((t.oh * 2) * w + t.ow * 2) * C;
      const T* r1 = r0 + size_t(w) * C;
      const Pack<T> in00 = load_pack(r0), in01 = load_pack(r0 + C), in10 = load_pack(r1),
                    in11 = load_pack(r1 + C);
      consider(in00, 0, 0);
      consider(in01, 0, 1);
      consider(in10, 1, 0);
      consider(in11, 1, 1);
    } else {
      for (uint32_t a = 0; a < kh; ++a)
        for (uint32_t b = 0; b < kw; ++b)
          consider(load_pack(xp + size_t((t.oh * kh + a) * w + t.ow * kw + b) * C), a, b);
    }
    Pack<T> out;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float r = g.max ? v[k] : v[k] / float(kh * kw);
      out.v[k] = from_f32<T>(g.relu ? relu_forward(r) : r);
    }
    store_pack(y + size_t(q) * N, out);
    if (g.max) store_places<A, N>(argmax + size_t(q) * N, at);
  }
}

template <class T, class A>
__global__ void pool_backward_tiled_pack_kernel(PoolGeometry g, const T* dy, const T* z, const A* argmax,
                                                T* dx, uint32_t packs) {
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
    if (g.max) load_places<A, N>(argmax + size_t(q) * N, at);
    for_tiled_window(g, t.oh, t.ow, [&](uint32_t idx, bool inside, int32_t place) {
      Pack<T> out;
#pragma unroll
      for (int k = 0; k < N; ++k)
        out.v[k] = from_f32<T>(!inside ? 0.f : g.max ? (place == at[k] ? d[k] : 0.f) : d[k]);
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

// The tiled kernels' argmax type: a byte a place where the window has at most 256 values.
bool byte_places(const PoolGeometry& g) { return g.kh * g.kw <= 256; }
template <class F>
void with_place_type(const PoolGeometry& g, F&& f) {
  if (byte_places(g))
    f(uint8_t{});
  else
    f(int32_t{});
}

// Whether the forward goes by packs with these pointers: channels-last, whole packs, aligned.
template <class T>
bool forward_packs(const PoolGeometry& g, const void* x, const void* y, const void* argmax) {
  return g.channels_last && packs_fit<T>(g.channels, {x, y, g.max ? argmax : nullptr});
}

// The tiled forward by packs (forward_packs), 2x2 windows with their loads first; kBn: through the
// batchnorm before it (launch_pool2d_forward_normalized).
template <class T, bool kBn>
void launch_tiled_pack_forward(const PoolGeometry& g, const T* x, T* y, void* argmax, const PoolNormalize& bn,
                               cudaStream_t stream) {
  const int64_t n = g.batch * g.channels * g.oh * g.ow;
  const unsigned grid = grid_for(n / kPack<T>);
  const uint32_t packs = uint32_t(n / kPack<T>);
  with_place_type(g, [&](auto place) {
    using A = decltype(place);
    A* at = static_cast<A*>(argmax);
    if (g.kh == 2 && g.kw == 2)
      pool_forward_tiled_pack_kernel<T, kBn, A, true><<<grid, kThreads, 0, stream>>>(g, x, y, at, packs, bn);
    else
      pool_forward_tiled_pack_kernel<T, kBn, A, false><<<grid, kThreads, 0, stream>>>(g, x, y, at, packs, bn);
  });
}

}  // namespace

size_t pool2d_argmax_bytes(const PoolGeometry& g) {
  return size_t(g.batch * g.channels * g.oh * g.ow) * (tiles(g) && byte_places(g) ? 1 : sizeof(int32_t));
}

void launch_pool2d_forward(const PoolGeometry& g, DType t, const void* x, void* y, void* argmax,
                           cudaStream_t stream) {
  const int64_t n = g.batch * g.channels * g.oh * g.ow;
  if (n <= 0) return;
  if (tiles(g)) {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      const T* xt = static_cast<const T*>(x);
      T* yt = static_cast<T*>(y);
      if (forward_packs<T>(g, x, y, argmax)) {
        launch_tiled_pack_forward<T, false>(g, xt, yt, argmax, PoolNormalize{}, stream);
        return;
      }
      with_place_type(g, [&](auto place) {
        using A = decltype(place);
        pool_forward_tiled_kernel<T, A>
            <<<grid_for(n), kThreads, 0, stream>>>(g, xt, yt, static_cast<A*>(argmax), uint32_t(n));
      });
    });
    CUDA_CHECK_LAUNCH();
    return;
  }
  int32_t* argmax32 = static_cast<int32_t*>(argmax);
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    with_index_type({n, g.batch * g.channels * g.h * g.w}, [&](auto index) {
      using I = decltype(index);
      if (forward_packs<T>(g, x, y, argmax))
        pool_forward_pack_kernel<T, I><<<grid_for(n / kPack<T>), kThreads, 0, stream>>>(
            g, static_cast<const T*>(x), static_cast<T*>(y), argmax32, I(n / kPack<T>));
      else
        pool_forward_kernel<T, I>
            <<<grid_for(n), kThreads, 0, stream>>>(g, static_cast<const T*>(x), static_cast<T*>(y), argmax32);
    });
  });
  CUDA_CHECK_LAUNCH();
}

bool pool2d_normalizes(const PoolGeometry& g, DType t, const void* x, const void* y, const void* argmax) {
  bool ok = false;
  with_dtype(t, [&](auto tag) { ok = tiles(g) && forward_packs<decltype(tag)>(g, x, y, argmax); });
  return ok;
}

void launch_pool2d_forward_normalized(const PoolGeometry& g, DType t, const void* x, const PoolNormalize& bn,
                                      void* y, void* argmax, cudaStream_t stream) {
  if (!pool2d_normalizes(g, t, x, y, argmax))
    throw InternalError("launch_pool2d_forward_normalized: not a tiling, channels-last pooling by packs");
  const int64_t n = g.batch * g.channels * g.oh * g.ow;
  if (n <= 0) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    launch_tiled_pack_forward<T, true>(g, static_cast<const T*>(x), static_cast<T*>(y), argmax, bn, stream);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_pool2d_backward(const PoolGeometry& g, DType t, const void* dy, const void* z, const void* argmax,
                            void* dx, cudaStream_t stream) {
  const int64_t n = g.batch * g.channels * g.h * g.w;
  if (n <= 0) return;
  if (tiles(g)) {
    const int64_t n_out = g.batch * g.channels * g.oh * g.ow;
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      const T *dyt = static_cast<const T*>(dy), *zt = static_cast<const T*>(z);
      with_place_type(g, [&](auto place) {
        using A = decltype(place);
        const A* at = static_cast<const A*>(argmax);
        if (g.channels_last &&
            packs_fit<T>(g.channels, {dy, g.relu ? z : nullptr, g.max ? argmax : nullptr, dx}))
          pool_backward_tiled_pack_kernel<T, A><<<grid_for(n_out / kPack<T>), kThreads, 0, stream>>>(
              g, dyt, zt, at, static_cast<T*>(dx), uint32_t(n_out / kPack<T>));
        else
          pool_backward_tiled_kernel<T, A><<<grid_for(n_out), kThreads, 0, stream>>>(
              g, dyt, zt, at, static_cast<T*>(dx), uint32_t(n_out));
      });
    });
    CUDA_CHECK_LAUNCH();
    return;
  }
  const int32_t* argmax32 = static_cast<const int32_t*>(argmax);
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    const T *dyt = static_cast<const T*>(dy), *zt = static_cast<const T*>(z);
    with_index_type({n, g.batch * g.channels * g.oh * g.ow}, [&](auto index) {
      using I = decltype(index);
      if (g.channels_last &&
          packs_fit<T>(g.channels, {dy, g.relu ? z : nullptr, g.max ? argmax : nullptr, dx}))
        pool_backward_pack_kernel<T, I><<<grid_for(n / kPack<T>), kThreads, 0, stream>>>(
            g, dyt, zt, argmax32, static_cast<T*>(dx), I(n / kPack<T>));
      else
        pool_backward_kernel<T, I>
            <<<grid_for(n), kThreads, 0, stream>>>(g, dyt, zt, argmax32, static_cast<T*>(dx));
    });
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
