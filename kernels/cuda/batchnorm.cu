// Batch normalization kernels (see batchnorm.cuh).
#include <algorithm>
#include <type_traits>

#include "kernels/cuda/batchnorm.cuh"
#include "kernels/cuda/batchnorm_value.cuh"
#include "kernels/cuda/channel_packs.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/vec16.cuh"
#include "lib/core/batchnorm_sync_formula.h"
#include "lib/core/relu_formula.h"

namespace trainer::cuda {
namespace {

// Per block: the sums of two per-value terms over one piece of one channel; block b is piece
// b % parts of channel b / parts. V = 1: Term(i, c, a, b) adds value i's terms to the accumulators.
// V = 4 (fp32 NCHW planes of whole float4s, aligned: nchw_float4s): the walk goes a float4 at a
// time and Term::four(i4, c, a, b) adds float4 i4's four values in order; a quarter of the loads
// and of the walk's steps (resnet_fashion_mnist's 28 x 28 planes were read at a third of the
// memory's rate one float at a time).
template <int V, class Term>
__global__ void batchnorm_partial_kernel(BatchNormGeometry g, Term term, double* partial) {
  __shared__ double sa[kThreads], sb[kThreads];
  const int64_t c = blockIdx.x / g.parts, piece = blockIdx.x % g.parts;
  const int64_t S = g.spatial / V, n = g.batch * S, len = (n + g.parts - 1) / g.parts;
  const int64_t begin = piece * len, end = begin + len < n ? begin + len : n;
  double a = 0, b = 0;
  // Value (or float4) j = (sample, s) is at (sample C + c) S + s. The walk advances (sample, s) by
  // blockDim.x with one carry instead of dividing per value: j / S and j % S in 64 bits were most
  // of this kernel's instructions (resnet_fashion_mnist, H200, ncu: the statistics' pass 102 -> 64
  // us a step, the gradient's 138 -> 114 us, for 13 batchnorms).
  const int64_t plane = g.channels * S;
  const int64_t ds = int64_t(blockDim.x) % S, step = int64_t(blockDim.x) / S * plane + ds;
  int64_t j = begin + threadIdx.x, s = j % S, at = (j / S * g.channels + c) * S + s;
  for (; j < end; j += blockDim.x) {
    if constexpr (V == 4)
      term.four(at, c, a, b);
    else
      term(at, c, a, b);
    s += ds;
    at += step;
    if (s >= S) {
      s -= S;
      at += plane - S;
    }
  }
  sa[threadIdx.x] = a;
  sb[threadIdx.x] = b;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) {
      sa[threadIdx.x] += sa[threadIdx.x + stride];
      sb[threadIdx.x] += sb[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partial[2 * blockIdx.x] = sa[0];
    partial[2 * blockIdx.x + 1] = sb[0];
  }
}

// The same sums for channels-last tensors: block (tile, piece) covers channels [32 tile, 32 tile +
// 32) over the rows of its piece; thread (x, y) = (channel in the tile, row phase mod 8); the 8
// phases are added in order.
template <class Term>
__global__ void batchnorm_partial_nhwc_kernel(BatchNormGeometry g, Term term, double* partial) {
  __shared__ double sa[8][32], sb[8][32];
  const int tx = int(threadIdx.x % 32), ty = int(threadIdx.x / 32);
  const int64_t c = int64_t(blockIdx.x) * 32 + tx, piece = blockIdx.y;
  const int64_t n = g.count(), begin = piece * g.part_len;
  const int64_t end = begin + g.part_len < n ? begin + g.part_len : n;
  double a = 0, b = 0;
  if (c < g.channels)
    for (int64_t r = begin + ty; r < end; r += 8) term(r * g.channels + c, c, a, b);
  sa[ty][tx] = a;
  sb[ty][tx] = b;
  __syncthreads();
  if (ty != 0 || c >= g.channels) return;
  for (int k = 1; k < 8; ++k) {
    a += sa[k][tx];
    b += sb[k][tx];
  }
  partial[2 * (c * g.parts + piece)] = a;
  partial[2 * (c * g.parts + piece) + 1] = b;
}

// Writes a pack reduction's sums where the per-channel passes read them.
struct PartialSink {
  double* partial;
  int64_t parts;
  __device__ void operator()(int64_t c, int s, int64_t piece, double sum) const {
    partial[2 * (c * parts + piece) + s] = sum;
  }
};

// Whether an NCHW pass may go a float4 at a time: fp32, planes of whole float4s, every pointer
// (null: absent) 16-byte aligned, and the float4 count in 32 bits.
template <class T>
bool nchw_float4s(const BatchNormGeometry& g, std::initializer_list<const void*> pointers) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    if (g.channels_last || g.spatial % 4 != 0) return false;
    for (const void* p : pointers)
      if (!aligned16(p)) return false;
    return fits_int32_loop(g.batch * g.channels * g.spatial / 4);
  }
}

// Per-value sums of each channel into `partial` (2 per channel and piece), in either layout; by
// packs where the geometry and the pointers allow (pack_term, the same terms).
template <class T, class Term, class PackTerm>
void launch_partial(const BatchNormGeometry& g, Term term, PackTerm pack_term,
                    std::initializer_list<const void*> pointers, double* partial, cudaStream_t stream) {
  const PackTiles tiles = pack_tiles(kPack<T>, g.channels);
  if (g.channels_last && tiles.width > 0 && packs_fit<T>(g.channels, pointers)) {
    launch_pack_reduce<T>(tiles, g.count(), g.channels, RowSplit{g.parts, g.part_len}, pack_term,
                          PartialSink{partial, g.parts}, stream);
    return;
  }
  if (g.channels_last) {
    const dim3 grid(unsigned((g.channels + 31) / 32), unsigned(g.parts));
    batchnorm_partial_nhwc_kernel<<<grid, 256, 0, stream>>>(g, term, partial);
  } else if (nchw_float4s<T>(g, pointers)) {
    batchnorm_partial_kernel<4><<<unsigned(g.channels * g.parts), kThreads, 0, stream>>>(g, term, partial);
  } else {
    batchnorm_partial_kernel<1><<<unsigned(g.channels * g.parts), kThreads, 0, stream>>>(g, term, partial);
  }
}

// A fused relu's mask in the backward pack kernels: z = relu(y) > 0 exactly where y > 0, and y is
// bn_value(x) with this step's mean, inv, gamma and beta (the optimizer has not run yet), so the
// mask is recomputed from x instead of reading z: one tensor fewer in each of the two passes.
struct ReluFromX {
  const float *gamma = nullptr, *beta = nullptr, *inv = nullptr;  // null: no fused relu
};

template <class T>
struct StatsTerm {  // x, x^2
  const T* x;
  __device__ void operator()(int64_t i, int64_t, double& a, double& b) const {
    const double v = to_f32(x[i]);
    a += v;
    b += v * v;
  }
  // Float4 number i4 (fp32 only: nchw_float4s).
  __device__ void four(int64_t i4, int64_t, double& a, double& b) const {
    const float4 v = __ldg(reinterpret_cast<const float4*>(x) + i4);
    for (const float f : {v.x, v.y, v.z, v.w}) {
      a += double(f);
      b += double(f) * double(f);
    }
  }
};

// A fused relu (z: its output, this kernel's stored y; null: none): the gradient of the
// batchnorm's output from the relu's, dz, as the relu kernel computes and stores it (eltwise.cu:
// z > 0 ? dz : 0 dz, rounded to T), so fused and unfused steps agree bit for bit.
template <class T, class I>
__device__ __forceinline__ float relu_input_grad(const T* z, const T* dz, I i) {
  const float g = to_f32(dz[i]);
  if (!z) return g;
  return to_f32(from_f32<T>(relu_grad_from_output(to_f32(z[i]), g)));
}

template <class T>
struct GradTerm {  // dy, dy (x - mean); dy = relu_input_grad(z, dz) with a fused relu
  const T *x, *dy, *z;
  const float* mean;
  __device__ void operator()(int64_t i, int64_t c, double& a, double& b) const {
    const double g = relu_input_grad(z, dy, i);
    a += g;
    b += g * (double(to_f32(x[i])) - double(mean[c]));
  }
  __device__ void four(int64_t i4, int64_t c, double& a, double& b) const {
    const float4 xv = __ldg(reinterpret_cast<const float4*>(x) + i4);
    const float4 dv = __ldg(reinterpret_cast<const float4*>(dy) + i4);
    float4 zv = dv;
    if (z) zv = __ldg(reinterpret_cast<const float4*>(z) + i4);
    const float xs[4] = {xv.x, xv.y, xv.z, xv.w}, ds[4] = {dv.x, dv.y, dv.z, dv.w},
                zs[4] = {zv.x, zv.y, zv.z, zv.w};
    const double m = mean[c];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const double g = z ? relu_grad_from_output(zs[k], ds[k]) : ds[k];  // fp32: relu_input_grad's rule
      a += g;
      b += g * (double(xs[k]) - m);
    }
  }
};

// The same terms a pack at a time (channel_packs.cuh: pack_reduce_kernel).
template <class T>
struct StatsPack {  // summed in double a thread too: the variance is E[x^2] - mean^2
  static constexpr int kSums = 2, N = kPack<T>, kAhead = 4;
  using Acc = double;
  using Loaded = Pack<T>;
  const T* x;
  __device__ void channel(int64_t) {}
  __device__ Loaded load(int64_t e) const { return load_pack(x + e); }
  __device__ void add(const Loaded& p, double (&acc)[kSums][N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const double v = to_f32(p.v[k]);
      acc[0][k] += v;
      acc[1][k] += v * v;
    }
  }
};

template <class T>
struct GradPack {  // 16-bit values: summed in float a thread (centred terms, tens of rows), then double
  static constexpr int kSums = 2, N = kPack<T>, kAhead = 4;
  using Acc = std::conditional_t<sizeof(T) == 2, float, double>;
  struct Loaded {
    Pack<T> x, dy;
  };
  const T *x, *dy;
  const float* mean;
  ReluFromX relu;  // a fused relu: its mask from x
  float m[N] = {}, scale[N] = {}, shift[N] = {};
  __device__ void channel(int64_t c0) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      m[k] = mean[c0 + k];
      if (relu.gamma) {
        scale[k] = relu.gamma[c0 + k] * relu.inv[c0 + k];
        shift[k] = relu.beta[c0 + k];
      }
    }
  }
  __device__ Loaded load(int64_t e) const {
    Loaded l;
    l.x = load_pack(x + e);
    l.dy = load_pack(dy + e);
    return l;
  }
  __device__ void add(const Loaded& l, Acc (&acc)[kSums][N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float xv = to_f32(l.x.v[k]);
      float g = to_f32(l.dy.v[k]);  // relu_input_grad's rule, value by value, y for z
      if (relu.gamma)
        g = to_f32(from_f32<T>(relu_grad_from_output(to_f32(bn_value<T>(xv, m[k], scale[k], shift[k])), g)));
      acc[0][k] += Acc(g);
      acc[1][k] += Acc(g) * (Acc(xv) - Acc(m[k]));
    }
  }
};

// The pieces of channel c, summed by one warp: lane l adds pieces l, l + 32, ... in order, then a
// fixed shuffle tree (deterministic; hundreds of pieces a channel in channels-last geometries,
// which one thread adding them took 35 us for).
__device__ __forceinline__ void channel_sums(const BatchNormGeometry& g, const double* partial, int64_t c,
                                             int lane, double& a, double& b) {
  a = 0;
  b = 0;
  for (int64_t p = lane; p < g.parts; p += 32) {
    a += partial[2 * (c * g.parts + p)];
    b += partial[2 * (c * g.parts + p) + 1];
  }
  a = warp_sum(a);
  b = warp_sum(b);
}

// One warp per channel (launch with grid_for(32 * channels) threads); lane 0 writes.
__device__ __forceinline__ int64_t warp_channel() { return global_index() / 32; }
__device__ __forceinline__ int64_t warp_channel_stride() { return grid_stride() / 32; }

// bias: a bias the layer before left out (KernelContext::takes_bias), in the running mean only.
__global__ void batchnorm_batch_stats_kernel(BatchNormGeometry g, const double* partial, float momentum,
                                             float unbias, float eps, float* mean, float* inv,
                                             float* running_mean, float* running_var, const float* bias) {
  const int lane = int(threadIdx.x % 32);
  for (int64_t c = warp_channel(); c < g.channels; c += warp_channel_stride()) {
    double sum, sq;
    channel_sums(g, partial, c, lane, sum, sq);
    if (lane) continue;
    const double n = double(g.count());
    const double m = sum / n;
    const double var = sq / n - m * m;
    const float mf = float(m), vf = var > 0 ? float(var) : 0.f;
    mean[c] = mf;
    inv[c] = 1.f / sqrtf(vf + eps);
    running_mean[c] = (1.f - momentum) * running_mean[c] + momentum * (bias ? mf + bias[c] : mf);
    running_var[c] = (1.f - momentum) * running_var[c] + momentum * vf * unbias;
  }
}

__global__ void batchnorm_running_stats_kernel(int64_t channels, const float* running_mean,
                                               const float* running_var, float eps, float* mean, float* inv,
                                               const float* bias) {
  for (int64_t c = global_index(); c < channels; c += grid_stride()) {
    mean[c] = bias ? running_mean[c] - bias[c] : running_mean[c];  // (x + b) - rm = x - (rm - b)
    inv[c] = 1.f / sqrtf(running_var[c] + eps);
  }
}

// Index arithmetic in I: 32 bits where the tensor allows (launch.cuh: fits_int32_loop).
template <class T, class I>
__global__ void batchnorm_normalize_kernel(BatchNormGeometry g, const T* x, const float* mean,
                                           const float* inv, const float* gamma, const float* beta, bool relu,
                                           T* y) {
  const I n = I(g.batch * g.channels * g.spatial), stride = I(gridDim.x) * I(blockDim.x);
  const I first = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x);
  ChannelWalk<I> ch(first, stride, I(g.channels), I(g.spatial), g.channels_last);
  for (I i = first; i < n; i += stride, ch.next()) {
    const I c = ch.at(i);
    const T v = bn_value<T>(to_f32(x[i]), mean[c], gamma[c] * inv[c], beta[c]);
    if (!relu) {
      y[i] = v;
      continue;
    }
    const float f = to_f32(v);  // the relu kernel's rule on the rounded value (eltwise.cu)
    y[i] = from_f32<T>(relu_forward(f));
  }
}

// The same a float4 at a time (nchw_float4s): four values of one plane, so of one channel, whose
// constants are loaded once, and one channel computation per four values (the value-at-a-time
// kernel ran resnet_fashion_mnist's 28 x 28 planes at a quarter of the memory's rate). The same
// arithmetic value by value: the same bits.
__global__ void batchnorm_normalize_nchw4_kernel(int n4, int S4, int C, const float4* __restrict__ x,
                                                 const float* mean, const float* inv, const float* gamma,
                                                 const float* beta, bool relu, float4* __restrict__ y) {
  for (int v = int(blockIdx.x * blockDim.x + threadIdx.x); v < n4; v += int(gridDim.x * blockDim.x)) {
    const int c = (v / S4) % C;
    const float m = mean[c], scale = gamma[c] * inv[c], shift = beta[c];
    const float4 a = __ldg(x + v);
    float4 o = make_float4(bn_value<float>(a.x, m, scale, shift), bn_value<float>(a.y, m, scale, shift),
                           bn_value<float>(a.z, m, scale, shift), bn_value<float>(a.w, m, scale, shift));
    if (relu) o = make_float4(relu_forward(o.x), relu_forward(o.y), relu_forward(o.z), relu_forward(o.w));
    y[v] = o;
  }
}

// Per channel: dgamma, dbeta and the coefficients of dx = k (dy - shift - (x - mean) slope); dbias
// (non-null: a taken bias, KernelContext::takes_bias) = sum of dx = k (sum dy - n shift - slope
// sum (x - mean)): with batch statistics shift = sum dy / n and sum (x - mean) = 0, so exactly 0
// (the bias cancels in x + b - mean(x + b)); with the running ones (shift = slope = 0) k sum dy.
__global__ void batchnorm_grad_kernel(BatchNormGeometry g, const double* partial, const float* inv,
                                      const float* gamma, bool batch_stats, float* dgamma, float* dbeta,
                                      float* coef, float* dbias) {
  const int lane = int(threadIdx.x % 32);
  for (int64_t c = warp_channel(); c < g.channels; c += warp_channel_stride()) {
    double sum_dy, sum_dy_xc;
    channel_sums(g, partial, c, lane, sum_dy, sum_dy_xc);
    if (lane) continue;
    const double iv = inv[c];
    const double dg = sum_dy_xc * iv;
    dgamma[c] = float(dg);
    dbeta[c] = float(sum_dy);
    const double n = double(g.count());
    coef[c] = gamma[c] * inv[c];
    coef[g.channels + c] = batch_stats ? float(sum_dy / n) : 0.f;
    coef[2 * g.channels + c] = batch_stats ? float(iv * dg / n) : 0.f;
    if (dbias) dbias[c] = batch_stats ? 0.f : float(double(gamma[c]) * iv * sum_dy);
  }
}

template <class T, class I>
__global__ void batchnorm_dx_kernel(BatchNormGeometry g, const T* x, const T* dy, const T* z,
                                    const float* mean, const float* coef, T* dx) {
  const I n = I(g.batch * g.channels * g.spatial), C = I(g.channels), stride = I(gridDim.x) * I(blockDim.x);
  const I first = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x);
  ChannelWalk<I> ch(first, stride, C, I(g.spatial), g.channels_last);
  for (I i = first; i < n; i += stride, ch.next()) {
    const I c = ch.at(i);
    const float d = relu_input_grad(z, dy, i);
    dx[i] = from_f32<T>(coef[c] * (d - coef[C + c] - (to_f32(x[i]) - mean[c]) * coef[2 * C + c]));
  }
}

__device__ __forceinline__ float bn_dx_value(float x, float dy, bool relu, float z, float m, float k,
                                             float shift, float slope) {
  const float d = relu ? relu_grad_from_output(z, dy) : dy;  // relu_input_grad's rule in fp32
  return k * (d - shift - (x - m) * slope);
}

__global__ void batchnorm_dx_nchw4_kernel(int n4, int S4, int C, const float4* __restrict__ x,
                                          const float4* __restrict__ dy, const float4* __restrict__ z,
                                          const float* mean, const float* coef, float4* __restrict__ dx) {
  for (int v = int(blockIdx.x * blockDim.x + threadIdx.x); v < n4; v += int(gridDim.x * blockDim.x)) {
    const int c = (v / S4) % C;
    const float m = mean[c], k = coef[c], shift = coef[C + c], slope = coef[2 * C + c];
    const float4 a = __ldg(x + v), d = __ldg(dy + v);
    const bool relu = z != nullptr;
    const float4 zv = relu ? __ldg(z + v) : d;
    dx[v] = make_float4(bn_dx_value(a.x, d.x, relu, zv.x, m, k, shift, slope),
                        bn_dx_value(a.y, d.y, relu, zv.y, m, k, shift, slope),
                        bn_dx_value(a.z, d.z, relu, zv.z, m, k, shift, slope),
                        bn_dx_value(a.w, d.w, relu, zv.w, m, k, shift, slope));
  }
}

// The element-wise passes a pack at a time (channels-last, packs_fit; channel_packs.cuh): each
// thread keeps one pack of channels, their constants loaded once, over its rows. The same
// arithmetic value by value as the kernels above: the same bits.
template <class T>
__global__ void batchnorm_normalize_pack_kernel(PackRows r, const T* __restrict__ x, const float* mean,
                                                const float* inv, const float* gamma, const float* beta,
                                                bool relu, T* __restrict__ y) {
  constexpr int N = kPack<T>;
  const PackCursor p = pack_cursor(r, N);
  if (p.row >= p.end) return;
  float m[N], scale[N], shift[N];
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t c = p.c0 + k;
    m[k] = mean[c];
    scale[k] = gamma[c] * inv[c];
    shift[k] = beta[c];
  }
  for (int64_t row = p.row; row < p.end; row += p.step) {
    const int64_t e = row * r.channels + p.c0;
    const Pack<T> in = load_pack(x + e);
    Pack<T> out;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const T v = bn_value<T>(to_f32(in.v[k]), m[k], scale[k], shift[k]);
      out.v[k] = relu ? from_f32<T>(relu_forward(to_f32(v))) : v;
    }
    store_pack(y + e, out);
  }
}

template <class T>
__global__ void batchnorm_dx_pack_kernel(PackRows r, const T* __restrict__ x, const T* __restrict__ dy,
                                         ReluFromX relu, const float* mean, const float* coef,
                                         T* __restrict__ dx) {
  constexpr int N = kPack<T>;
  const PackCursor p = pack_cursor(r, N);
  if (p.row >= p.end) return;
  const int64_t C = r.channels;
  float m[N], k0[N], k1[N], k2[N], scale[N] = {}, shift[N] = {};
#pragma unroll
  for (int k = 0; k < N; ++k) {
    const int64_t c = p.c0 + k;
    m[k] = mean[c];
    k0[k] = coef[c];
    k1[k] = coef[C + c];
    k2[k] = coef[2 * C + c];
    if (relu.gamma) {
      scale[k] = relu.gamma[c] * relu.inv[c];
      shift[k] = relu.beta[c];
    }
  }
  const auto emit = [&](const Pack<T>& xv, const Pack<T>& dv, int64_t e) {
    Pack<T> out;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float xf = to_f32(xv.v[k]);
      float d = to_f32(dv.v[k]);  // relu_input_grad's rule, value by value, y for z
      if (relu.gamma)
        d = to_f32(from_f32<T>(relu_grad_from_output(to_f32(bn_value<T>(xf, m[k], scale[k], shift[k])), d)));
      out.v[k] = from_f32<T>(k0[k] * (d - k1[k] - (xf - m[k]) * k2[k]));
    }
    store_pack(dx + e, out);
  };
  // Two rows' loads in flight at once a thread.
  for (int64_t row = p.row; row < p.end; row += 2 * int64_t(p.step)) {
    const int64_t e = row * C + p.c0, e2 = e + int64_t(p.step) * C;
    const bool two = row + p.step < p.end;
    const Pack<T> xv = load_pack(x + e), dv = load_pack(dy + e);
    Pack<T> xv2, dv2;
    if (two) {
      xv2 = load_pack(x + e2);
      dv2 = load_pack(dy + e2);
    }
    emit(xv, dv, e);
    if (two) emit(xv2, dv2, e2);
  }
}

// Synchronized statistics (batchnorm.cuh): one warp per channel adds its pieces as above.
__global__ void batchnorm_stat_totals_kernel(BatchNormGeometry g, const double* partial, double* sums) {
  const int lane = int(threadIdx.x % 32);
  for (int64_t c = warp_channel(); c < g.channels; c += warp_channel_stride()) {
    double sum, sq;
    channel_sums(g, partial, c, lane, sum, sq);
    if (lane) continue;
    sums[2 * c] = sum;
    sums[2 * c + 1] = sq;
  }
  if (global_index() == 0) sums[2 * g.channels] = double(g.count());
}

__global__ void batchnorm_stats_from_sums_kernel(int64_t channels, const double* sums, float momentum,
                                                 float eps, float* mean, float* inv, float* running_mean,
                                                 float* running_var, const float* bias) {
  const double n = sums[2 * channels];
  for (int64_t c = global_index(); c < channels; c += grid_stride()) {
    const BatchNormStats s = batchnorm_stats(sums[2 * c], sums[2 * c + 1], n, eps);
    mean[c] = s.mean;
    inv[c] = s.inv;
    BatchNormStats r = s;  // the running mean is of x + b where the layer before left b out
    if (bias) r.mean = add_rn(r.mean, bias[c]);
    batchnorm_running_update(running_mean[c], running_var[c], r, n, momentum);
  }
}

// dbias: a taken bias's gradient, 0 with batch statistics (batchnorm_grad_kernel).
__global__ void batchnorm_grad_totals_kernel(BatchNormGeometry g, const double* partial, const float* inv,
                                             const float* weight, double* sums, float* dgamma, float* dbeta,
                                             float* dbias) {
  const int lane = int(threadIdx.x % 32);
  for (int64_t c = warp_channel(); c < g.channels; c += warp_channel_stride()) {
    double sum_dy, sum_dy_xc;
    channel_sums(g, partial, c, lane, sum_dy, sum_dy_xc);
    if (lane) continue;
    dgamma[c] = float(sum_dy_xc * inv[c]);
    dbeta[c] = float(sum_dy);
    if (dbias) dbias[c] = 0.f;
    const double w = *weight;
    sums[2 * c] = w * sum_dy;
    sums[2 * c + 1] = w * sum_dy_xc;
  }
}

__global__ void batchnorm_dx_coef_kernel(int64_t channels, const double* sums, const float* inv,
                                         const float* gamma, double rows_here, float* coef) {
  for (int64_t c = global_index(); c < channels; c += grid_stride()) {
    const BatchNormDx d = batchnorm_sync_dx(sums[2 * c], sums[2 * c + 1], gamma[c], inv[c], rows_here);
    coef[c] = d.scale;
    coef[channels + c] = d.shift;
    coef[2 * channels + c] = d.slope;
  }
}

// dx of the whole tensor (batchnorm_dx_kernel), 32-bit indices where they fit.
// relu: gamma, beta and inv for a fused relu's mask from x (with z non-null) in the pack kernel.
template <class T>
void launch_dx(const BatchNormGeometry& g, const T* x, const T* dy, const T* z, const float* mean,
               const float* coef, T* dx, ReluFromX relu, cudaStream_t stream) {
  const int64_t n = g.batch * g.channels * g.spatial;
  if (g.channels_last && packs_fit<T>(g.channels, {x, dy, dx})) {
    const PackLaunch l = pack_launch<T>(g.count(), g.channels, 8);
    batchnorm_dx_pack_kernel<T>
        <<<l.grid, 256, 0, stream>>>(l.rows, x, dy, z ? relu : ReluFromX{}, mean, coef, dx);
    return;
  }
  if (nchw_float4s<T>(g, {x, dy, z, dx})) {
    const int n4 = int(n / 4);
    batchnorm_dx_nchw4_kernel<<<grid_for(n4), kThreads, 0, stream>>>(
        n4, int(g.spatial / 4), int(g.channels), reinterpret_cast<const float4*>(x),
        reinterpret_cast<const float4*>(dy), reinterpret_cast<const float4*>(z), mean, coef,
        reinterpret_cast<float4*>(dx));
    return;
  }
  with_index_type({n}, [&](auto index) {
    batchnorm_dx_kernel<T, decltype(index)>
        <<<grid_for(n), kThreads, 0, stream>>>(g, x, dy, z, mean, coef, dx);
  });
}

}  // namespace

BatchNormGeometry batchnorm_geometry(int64_t batch, int64_t channels, int64_t spatial, bool channels_last,
                                     DType t) {
  BatchNormGeometry g;
  g.batch = batch;
  g.channels = channels;
  g.spatial = spatial;
  g.channels_last = channels_last;
  const int64_t n = g.count();
  if (channels_last) {  // at least 16 rows a thread one value a thread, about 32 by packs
    const PackTiles tiles = pack_tiles(pack_values(t), channels);
    const RowSplit s = pack_row_split(n, channels, tiles, 32);
    g.parts = s.parts;
    g.part_len = s.part_len;
    return g;
  }
  // Pieces of at least 16 values per thread, and about 1024 blocks in all at most.
  const int64_t by_size = (n + kThreads * 16 - 1) / (kThreads * 16);
  const int64_t by_blocks = std::max<int64_t>(1, 1024 / std::max<int64_t>(1, channels));
  g.parts = std::max<int64_t>(1, std::min(by_size, by_blocks));
  g.part_len = std::max<int64_t>(1, (n + g.parts - 1) / g.parts);
  return g;
}

void launch_batchnorm_batch_stats(const BatchNormGeometry& g, DType t, const void* x, float momentum,
                                  float eps, double* partial, float* mean, float* inv, float* running_mean,
                                  float* running_var, cudaStream_t stream, const float* bias) {
  if (g.channels <= 0 || g.count() <= 0) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    const T* xt = static_cast<const T*>(x);
    launch_partial<T>(g, StatsTerm<T>{xt}, StatsPack<T>{xt}, {x}, partial, stream);
  });
  CUDA_CHECK_LAUNCH();
  const int64_t n = g.count();
  const float unbias = n > 1 ? float(n) / float(n - 1) : 1.f;  // as the CPU computes it
  batchnorm_batch_stats_kernel<<<grid_for(32 * g.channels), kThreads, 0, stream>>>(
      g, partial, momentum, unbias, eps, mean, inv, running_mean, running_var, bias);
  CUDA_CHECK_LAUNCH();
}

bool batchnorm_by_packs(const BatchNormGeometry& g, DType t, std::initializer_list<const void*> pointers) {
  bool packs = false;
  with_dtype(t, [&](auto tag) { packs = g.channels_last && packs_fit<decltype(tag)>(g.channels, pointers); });
  return packs;
}

void launch_batchnorm_running_stats(const BatchNormGeometry& g, const float* running_mean,
                                    const float* running_var, float eps, float* mean, float* inv,
                                    cudaStream_t stream, const float* bias) {
  if (g.channels <= 0) return;
  batchnorm_running_stats_kernel<<<grid_for(g.channels), kThreads, 0, stream>>>(
      g.channels, running_mean, running_var, eps, mean, inv, bias);
  CUDA_CHECK_LAUNCH();
}

void launch_batchnorm_normalize(const BatchNormGeometry& g, DType t, const void* x, const float* mean,
                                const float* inv, const float* gamma, const float* beta, bool relu, void* y,
                                cudaStream_t stream) {
  const int64_t n = g.batch * g.channels * g.spatial;
  if (n <= 0) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    const T* xt = static_cast<const T*>(x);
    T* yt = static_cast<T*>(y);
    if (g.channels_last && packs_fit<T>(g.channels, {x, y})) {
      const PackLaunch l = pack_launch<T>(g.count(), g.channels, 8);
      batchnorm_normalize_pack_kernel<T>
          <<<l.grid, 256, 0, stream>>>(l.rows, xt, mean, inv, gamma, beta, relu, yt);
      return;
    }
    if (nchw_float4s<T>(g, {x, y})) {
      const int n4 = int(n / 4);
      batchnorm_normalize_nchw4_kernel<<<grid_for(n4), kThreads, 0, stream>>>(
          n4, int(g.spatial / 4), int(g.channels), reinterpret_cast<const float4*>(x), mean, inv, gamma, beta,
          relu, reinterpret_cast<float4*>(y));
      return;
    }
    with_index_type({n}, [&](auto index) {
      batchnorm_normalize_kernel<T, decltype(index)>
          <<<grid_for(n), kThreads, 0, stream>>>(g, xt, mean, inv, gamma, beta, relu, yt);
    });
  });
  CUDA_CHECK_LAUNCH();
}

void launch_batchnorm_backward(const BatchNormGeometry& g, DType t, const void* x, const void* dy,
                               const void* z, const float* mean, const float* inv, const float* gamma,
                               const float* beta, bool batch_stats, double* partial, float* coef,
                               float* dgamma, float* dbeta, void* dx, cudaStream_t stream, float* dbias) {
  const ReluFromX relu{gamma, beta, inv};
  if (g.channels <= 0 || g.count() <= 0) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    const T *xt = static_cast<const T*>(x), *dyt = static_cast<const T*>(dy), *zt = static_cast<const T*>(z);
    launch_partial<T>(g, GradTerm<T>{xt, dyt, zt, mean}, GradPack<T>{xt, dyt, mean, z ? relu : ReluFromX{}},
                      {x, dy}, partial, stream);
  });
  CUDA_CHECK_LAUNCH();
  batchnorm_grad_kernel<<<grid_for(32 * g.channels), kThreads, 0, stream>>>(
      g, partial, inv, gamma, batch_stats, dgamma, dbeta, coef, dbias);
  CUDA_CHECK_LAUNCH();
  if (!dx) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    launch_dx(g, static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<const T*>(z), mean, coef,
              static_cast<T*>(dx), relu, stream);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda

namespace trainer::cuda {

void launch_batchnorm_stat_sums(const BatchNormGeometry& g, DType t, const void* x, double* partial,
                                double* sums, cudaStream_t stream) {
  if (g.channels <= 0 || g.count() <= 0) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    const T* xt = static_cast<const T*>(x);
    launch_partial<T>(g, StatsTerm<T>{xt}, StatsPack<T>{xt}, {x}, partial, stream);
  });
  CUDA_CHECK_LAUNCH();
  batchnorm_stat_totals_kernel<<<grid_for(32 * g.channels), kThreads, 0, stream>>>(g, partial, sums);
  CUDA_CHECK_LAUNCH();
}

void launch_batchnorm_stats_from_sums(int64_t channels, const double* sums, float momentum, float eps,
                                      float* mean, float* inv, float* running_mean, float* running_var,
                                      cudaStream_t stream, const float* bias) {
  if (channels <= 0) return;
  batchnorm_stats_from_sums_kernel<<<grid_for(channels), kThreads, 0, stream>>>(
      channels, sums, momentum, eps, mean, inv, running_mean, running_var, bias);
  CUDA_CHECK_LAUNCH();
}

void launch_batchnorm_grad_sums(const BatchNormGeometry& g, DType t, const void* x, const void* dy,
                                const void* z, const float* mean, const float* inv, const float* gamma,
                                const float* beta, const float* weight, double* partial, double* sums,
                                float* dgamma, float* dbeta, cudaStream_t stream, float* dbias) {
  if (g.channels <= 0 || g.count() <= 0) return;
  const ReluFromX relu{gamma, beta, inv};
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    const T *xt = static_cast<const T*>(x), *dyt = static_cast<const T*>(dy), *zt = static_cast<const T*>(z);
    launch_partial<T>(g, GradTerm<T>{xt, dyt, zt, mean}, GradPack<T>{xt, dyt, mean, z ? relu : ReluFromX{}},
                      {x, dy}, partial, stream);
  });
  CUDA_CHECK_LAUNCH();
  batchnorm_grad_totals_kernel<<<grid_for(32 * g.channels), kThreads, 0, stream>>>(
      g, partial, inv, weight, sums, dgamma, dbeta, dbias);
  CUDA_CHECK_LAUNCH();
}

void launch_batchnorm_dx_from_sums(const BatchNormGeometry& g, DType t, const void* x, const void* dy,
                                   const void* z, const float* mean, const float* inv, const float* gamma,
                                   const float* beta, const double* sums, float* coef, void* dx,
                                   cudaStream_t stream) {
  const ReluFromX relu{gamma, beta, inv};
  const int64_t n = g.batch * g.channels * g.spatial;
  if (n <= 0 || !dx) return;
  batchnorm_dx_coef_kernel<<<grid_for(g.channels), kThreads, 0, stream>>>(g.channels, sums, inv, gamma,
                                                                          double(g.count()), coef);
  CUDA_CHECK_LAUNCH();
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    launch_dx(g, static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<const T*>(z), mean, coef,
              static_cast<T*>(dx), relu, stream);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
