// Direct convolutions (see direct_conv.cuh). These layers have too few outputs to keep an H100
// busy one thread per output, so each kernel also splits its sums over adjacent lanes and adds
// the lanes' parts with shuffles in a fixed order.
//   correlate_kernel: block (n, tile): sample n's window (in_c planes of an odd stride, so lanes
//     reading different channels hit different banks) and the tile's filters (in_c * R * S rows of
//     `tile` output channels) in shared memory; unit = (kPixels pixels, 4 output channels, every
//     split-th input channel): per (i, r, s) one float4 of filter values and kPixels window values
//     feed 16 independent sums.
//   filter_grad_kernel: block (g, t): for each of its samples, x's window and dy's tile (pixel-
//     major, 4 filters a float4) in shared memory; unit = ((c r s) or the bias, 4 filters, every
//     slices-th pixel), up to kItems units a thread accumulated together, in registers across the
//     block's samples; the block writes one partial sum per (k, c r s | bias).
//   filter_grad_combine_kernel: one thread per (k, c r s | bias) adds the blocks' partial sums in
//     block order.
#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/direct_conv.cuh"
#include "kernels/cuda/launch.cuh"

namespace trainer::cuda {
namespace {

constexpr int kBlock = 256;
constexpr int kItems = 4;   // filter-gradient items a thread accumulates, interleaved
constexpr int kPixels = 4;  // correlation pixels a thread computes

__device__ __forceinline__ void fma4(float4& a, float x, const float4& f) {
  a.x = fmaf(x, f.x, a.x);
  a.y = fmaf(x, f.y, a.y);
  a.z = fmaf(x, f.z, a.z);
  a.w = fmaf(x, f.w, a.w);
}

// window[i * plane + y * win_w + x] = in[n][i][y - top][x - left], zero outside.
__device__ __forceinline__ void load_window(float* win, const float* in, int n, int channels, int in_h,
                                            int in_w, int top, int left, int win_h, int win_w, int plane) {
  const int area = win_h * win_w, count = channels * area;
  for (int i = threadIdx.x; i < count; i += blockDim.x) {
    const int c = i / area, rem = i - c * area, y = rem / win_w - top, x = rem % win_w - left;
    win[c * plane + rem] = (y >= 0 && y < in_h && x >= 0 && x < in_w)
                               ? in[((int64_t(n) * channels + c) * in_h + y) * in_w + x]
                               : 0.f;
  }
}

// The window's floats in shared memory, rounded up to whole float4s.
__host__ __device__ inline int window_floats(int channels, int plane) {
  return (channels * plane + 3) / 4 * 4;
}

// KS: the filter width when known at compile time (the inner loop unrolled), 0 for any.
template <int KS>
__global__ void __launch_bounds__(kBlock)
    correlate_kernel(Correlation g, const float* __restrict__ in, const float* __restrict__ w,
                     const float* __restrict__ bias, float* __restrict__ out) {
  extern __shared__ float4 smem[];
  const int n = blockIdx.x, o0 = blockIdx.y * g.tile, quads = g.tile / 4;
  const int rows = g.in_c * g.r * g.s;
  float* win = reinterpret_cast<float*>(smem);
  float4* filt4 = smem + window_floats(g.in_c, g.plane) / 4;  // (rows, tile / 4)
  float* filt = reinterpret_cast<float*>(filt4);
  load_window(win, in, n, g.in_c, g.in_h, g.in_w, g.top, g.left, g.win_h, g.win_w, g.plane);
  // filt[(i r s)][o - o0]; the forward reads W's rows contiguously (row fastest).
  for (int j = threadIdx.x; j < rows * g.tile; j += blockDim.x) {
    const int oo = j / rows, row = j - oo * rows, o = o0 + oo;
    float v = 0.f;
    if (o < g.out_c) {
      if (!g.transposed) {
        v = w[int64_t(o) * rows + row];
      } else {  // input channel i is W's filter, output channel o its channel; flipped in r and s
        const int i = row / (g.r * g.s), rs = row - i * g.r * g.s, r = rs / g.s, s = rs - r * g.s;
        v = w[((int64_t(i) * g.out_c + o) * g.r + (g.r - 1 - r)) * g.s + (g.s - 1 - s)];
      }
    }
    filt[row * g.tile + oo] = v;
  }
  __syncthreads();
  // Unit: (kPixels pixels, 4 output channels, input channels split, split + g.split, ...); the
  // g.split units of one output group are adjacent lanes, added by shuffles in a fixed order.
  const int pixels = g.oh * g.ow, groups = (pixels + kPixels - 1) / kPixels;
  const int units = groups * quads * g.split, rounds = (units + blockDim.x - 1) / blockDim.x;
  for (int round = 0; round < rounds; ++round) {
    const int unit = round * blockDim.x + threadIdx.x;
    if (unit - int(threadIdx.x % 32) >= units) break;  // the whole warp is past the end
    const bool live = unit < units;
    const int split = unit % g.split, rest = live ? unit / g.split : 0;
    const int quad = rest / groups, first = (rest - quad * groups) * kPixels;
    const int width = KS ? KS : g.s;
    int origin[kPixels];  // offsets into the window (shared memory)
#pragma unroll
    for (int t = 0; t < kPixels; ++t) {
      const int pix = min(first + t, pixels - 1), p = pix / g.ow, q = pix - p * g.ow;
      origin[t] = p * g.sh * g.win_w + q * g.sw;
    }
    float4 acc[kPixels];
#pragma unroll
    for (int t = 0; t < kPixels; ++t) acc[t] = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int i = split; i < g.in_c; i += g.split) {
      for (int r = 0; r < g.r; ++r) {
        const int off = i * g.plane + r * g.win_w;
        const float4* f = filt4 + ((i * g.r + r) * width) * quads + quad;
#pragma unroll
        for (int s = 0; s < width; ++s) {
          const float4 fv = f[s * quads];
#pragma unroll
          for (int t = 0; t < kPixels; ++t) fma4(acc[t], win[origin[t] + off + s], fv);
        }
      }
    }
    for (int lanes = g.split / 2; lanes > 0; lanes /= 2) {  // every lane of the warp takes part
#pragma unroll
      for (int t = 0; t < kPixels; ++t) {
        acc[t].x += __shfl_down_sync(0xffffffffu, acc[t].x, lanes);
        acc[t].y += __shfl_down_sync(0xffffffffu, acc[t].y, lanes);
        acc[t].z += __shfl_down_sync(0xffffffffu, acc[t].z, lanes);
        acc[t].w += __shfl_down_sync(0xffffffffu, acc[t].w, lanes);
      }
    }
    if (!live || split != 0) continue;
    const int o = o0 + 4 * quad;
#pragma unroll
    for (int t = 0; t < kPixels; ++t) {
      if (first + t >= pixels) break;
      float* y = out + (int64_t(n) * g.out_c + o) * pixels + first + t;
      const float a[4] = {acc[t].x, acc[t].y, acc[t].z, acc[t].w};
#pragma unroll
      for (int j = 0; j < 4; ++j)
        if (o + j < g.out_c) y[int64_t(j) * pixels] = a[j] + (bias ? bias[o + j] : 0.f);
    }
  }
}

__global__ void __launch_bounds__(kBlock)
    filter_grad_kernel(FilterGradPlan g, const float* __restrict__ x, const float* __restrict__ dy,
                       float* __restrict__ partial) {
  extern __shared__ float4 smem[];
  const int k0 = blockIdx.y * g.tile, quads = g.tile / 4, pixels = g.oh * g.ow;
  const int rows = g.c * g.r * g.s, items = (rows + 1) * quads, units = items * g.slices;
  float* win = reinterpret_cast<float*>(smem);
  float4* d4 = smem + window_floats(g.c, g.plane) / 4;  // (pixels, tile / 4)
  float* d = reinterpret_cast<float*>(d4);
  // Unit j of this thread: item (row, quad) over the pixels slice, slice + slices, ...; the
  // slices of an item are adjacent lanes. Row `rows` is the bias (x = 1). Units past the end
  // repeat unit 0 and are not written (every lane takes part in the shuffles).
  const int slice = threadIdx.x % g.slices;
  int origin[kItems], quad_of[kItems];
  bool is_bias[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    int unit = threadIdx.x + j * kBlock;
    if (unit >= units) unit = slice;
    const int item = unit / g.slices, quad = item / (rows + 1), row = item - quad * (rows + 1);
    const int c = row / (g.r * g.s), rs = row - c * g.r * g.s, r = rs / g.s, s = rs - r * g.s;
    is_bias[j] = row == rows;
    origin[j] = is_bias[j] ? 0 : c * g.plane + r * g.win_w + s;
    quad_of[j] = quad;
  }
  float4 acc[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) acc[j] = make_float4(0.f, 0.f, 0.f, 0.f);
  const int n0 = blockIdx.x * g.per_block, n1 = min(g.n, n0 + g.per_block);
  for (int n = n0; n < n1; ++n) {
    __syncthreads();  // the previous sample's tiles are read
    load_window(win, x, n, g.c, g.h, g.w, g.top, g.left, g.win_h, g.win_w, g.plane);
    for (int j = threadIdx.x; j < g.tile * pixels; j += blockDim.x) {
      const int kk = j / pixels, pix = j - kk * pixels, k = k0 + kk;
      d[pix * g.tile + kk] = k < g.k ? dy[(int64_t(n) * g.k + k) * pixels + pix] : 0.f;
    }
    __syncthreads();
    int p = slice / g.ow, q = slice - p * g.ow;
    for (int pix = slice; pix < pixels; pix += g.slices) {
      const int xoff = p * g.sh * g.win_w + q * g.sw;
      const float4* dp = d4 + pix * quads;
#pragma unroll
      for (int j = 0; j < kItems; ++j) fma4(acc[j], is_bias[j] ? 1.f : win[origin[j] + xoff], dp[quad_of[j]]);
      q += g.slices;
      while (q >= g.ow) {
        q -= g.ow;
        ++p;
      }
    }
  }
  for (int lanes = g.slices / 2; lanes > 0; lanes /= 2) {
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      acc[j].x += __shfl_down_sync(0xffffffffu, acc[j].x, lanes);
      acc[j].y += __shfl_down_sync(0xffffffffu, acc[j].y, lanes);
      acc[j].z += __shfl_down_sync(0xffffffffu, acc[j].z, lanes);
      acc[j].w += __shfl_down_sync(0xffffffffu, acc[j].w, lanes);
    }
  }
  if (slice != 0) return;
  // partial[block][k][row], row == rows: the bias
  float* part = partial + blockIdx.x * (int64_t(g.k) * (rows + 1));
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const int unit = threadIdx.x + j * kBlock;
    if (unit >= units) continue;
    const int item = unit / g.slices, quad = item / (rows + 1), row = item - quad * (rows + 1);
    const int k = k0 + 4 * quad;
    const float a[4] = {acc[j].x, acc[j].y, acc[j].z, acc[j].w};
#pragma unroll
    for (int t = 0; t < 4; ++t)
      if (k + t < g.k) part[int64_t(k + t) * (rows + 1) + row] = a[t];
  }
}

__global__ void filter_grad_combine_kernel(int blocks, int k, int rows, const float* __restrict__ partial,
                                           float* __restrict__ dw, float* __restrict__ db) {
  const int64_t outputs = int64_t(k) * (rows + 1);
  for (int64_t o = global_index(); o < outputs; o += grid_stride()) {
    float sum = 0.f;
    for (int b = 0; b < blocks; ++b) sum += partial[b * outputs + o];
    const int64_t kk = o / (rows + 1), row = o - kk * (rows + 1);
    if (row < rows)
      dw[kk * rows + row] = sum;
    else if (db)
      db[kk] = sum;
  }
}

int round4(int64_t v) { return int((v + 3) / 4 * 4); }

struct DeviceLimits {
  size_t smem = 0;  // dynamic shared memory a block may opt in to
  int sms = 1;
};

DeviceLimits limits_of(int device) {
  DeviceLimits l;
  int smem = 0, sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  // Leave room for a second block on the SM where the window is small.
  l.smem = std::min<size_t>(size_t(smem), size_t(200) << 10);
  l.sms = std::max(1, sms);
  return l;
}

// The output-channel tile: as many as fit beside the window, then halved while the grid has
// fewer than two blocks an SM.
// Then the input channels are split over adjacent lanes until the grid has about 1024 threads
// an SM (the small layers these kernels take have too few outputs to keep the SMs busy).
Correlation plan_correlation(Correlation c, const DeviceLimits& lim) {
  c.plane = (c.win_h * c.win_w) | 1;
  const int64_t win4 = window_floats(c.in_c, c.plane);
  const int64_t rows = int64_t(c.in_c) * c.r * c.s;
  const int64_t room = int64_t(lim.smem / sizeof(float)) - win4;
  if (room < rows * 4 || c.n <= 0 || c.oh <= 0 || c.ow <= 0) return c;
  int tile = std::min(round4(c.out_c), int(room / rows) / 4 * 4);
  while (tile > 4 && int64_t(c.n) * ((c.out_c + tile - 1) / tile) < 2 * lim.sms) tile = round4(tile / 2);
  c.tile = tile;
  const int64_t groups = (int64_t(c.oh) * c.ow + kPixels - 1) / kPixels;
  const int64_t outputs = int64_t(c.n) * ((c.out_c + tile - 1) / tile) * (tile / 4) * groups;
  c.split = 1;
  while (c.split < 32 && 2 * c.split <= c.in_c && outputs * c.split < int64_t(lim.sms) * 1024) c.split *= 2;
  c.smem = size_t(win4 + rows * tile) * sizeof(float);
  c.fits = true;
  return c;
}

bool fits_int(const DirectConvGeometry& g) {
  const int64_t big = int64_t(1) << 30;
  return g.n * g.c * g.h * g.w < big && g.n * g.k * g.oh * g.ow < big && g.k * g.c * g.r * g.s < big;
}

}  // namespace

DirectConv::DirectConv(const DirectConvGeometry& g, int device) {
  if (!fits_int(g)) return;
  const DeviceLimits lim = limits_of(device);
  const int win_h = int((g.oh - 1) * g.sh + g.r), win_w = int((g.ow - 1) * g.sw + g.s);

  Correlation f;
  f.n = int(g.n);
  f.in_c = int(g.c);
  f.in_h = int(g.h);
  f.in_w = int(g.w);
  f.out_c = int(g.k);
  f.r = int(g.r);
  f.s = int(g.s);
  f.sh = int(g.sh);
  f.sw = int(g.sw);
  f.top = int(g.pad_top);
  f.left = int(g.pad_left);
  f.win_h = win_h;
  f.win_w = win_w;
  f.oh = int(g.oh);
  f.ow = int(g.ow);
  fwd_ = plan_correlation(f, lim);

  if (g.sh == 1 && g.sw == 1) {  // dx = dy correlated with the flipped, transposed W
    Correlation b;
    b.n = int(g.n);
    b.in_c = int(g.k);
    b.in_h = int(g.oh);
    b.in_w = int(g.ow);
    b.out_c = int(g.c);
    b.r = int(g.r);
    b.s = int(g.s);
    b.top = int(g.r - 1 - g.pad_top);
    b.left = int(g.s - 1 - g.pad_left);
    b.win_h = int(g.h + g.r - 1);
    b.win_w = int(g.w + g.s - 1);
    b.oh = int(g.h);
    b.ow = int(g.w);
    b.transposed = true;
    if (b.top >= 0 && b.left >= 0) bwd_data_ = plan_correlation(b, lim);
  }

  FilterGradPlan p;
  p.n = int(g.n);
  p.c = int(g.c);
  p.h = int(g.h);
  p.w = int(g.w);
  p.k = int(g.k);
  p.r = int(g.r);
  p.s = int(g.s);
  p.sh = int(g.sh);
  p.sw = int(g.sw);
  p.top = int(g.pad_top);
  p.left = int(g.pad_left);
  p.oh = int(g.oh);
  p.ow = int(g.ow);
  p.win_h = win_h;
  p.win_w = win_w;
  p.plane = (win_h * win_w) | 1;
  const int64_t win4 = window_floats(int(g.c), p.plane), rows = g.c * g.r * g.s, pixels = g.oh * g.ow;
  const int64_t room = int64_t(lim.smem / sizeof(float)) - win4;
  const int by_items = int(kItems * kBlock / (rows + 1)) * 4;  // quads * (rows + 1) <= kItems * kBlock
  const int by_smem = room > 0 ? int(room / std::max<int64_t>(pixels, 1)) / 4 * 4 : 0;
  const int tile = std::min({round4(g.k), by_items, by_smem});
  if (tile >= 4 && g.n > 0 && pixels > 0) {
    const int tiles = int((g.k + tile - 1) / tile);
    const int want = std::max(1, int(std::min<int64_t>(g.n, (2 * lim.sms + tiles - 1) / tiles)));
    p.per_block = int((g.n + want - 1) / want);
    p.blocks = int((g.n + p.per_block - 1) / p.per_block);
    p.tile = tile;
    // Pixel slices: as many adjacent lanes per item as the kItems units a thread keeps allow.
    const int64_t items = (rows + 1) * (tile / 4);
    p.slices = 1;
    while (p.slices < 32 && items * p.slices * 2 <= kItems * kBlock && p.slices * 2 <= pixels) p.slices *= 2;
    p.smem = size_t(win4 + pixels * tile) * sizeof(float);
    p.scratch_bytes = size_t(p.blocks) * size_t(g.k * (rows + 1)) * sizeof(float);
    p.fits = true;
  }
  bwd_filter_ = p;

  // Plan time: let the kernels take the shared memory their plans need.
  const size_t corr = std::max(fwd_.fits ? fwd_.smem : 0, bwd_data_.fits ? bwd_data_.smem : 0);
  if (corr > 48 * 1024)
    for (const void* k : {reinterpret_cast<const void*>(correlate_kernel<0>),
                          reinterpret_cast<const void*>(correlate_kernel<3>),
                          reinterpret_cast<const void*>(correlate_kernel<5>)})
      CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(lim.smem)));
  if (bwd_filter_.fits && bwd_filter_.smem > 48 * 1024)
    CUDA_CHECK(
        cudaFuncSetAttribute(filter_grad_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(lim.smem)));
}

namespace {

void launch_correlation(const Correlation& c, const float* in, const float* w, const float* bias, float* out,
                        cudaStream_t stream) {
  const dim3 grid(unsigned(c.n), unsigned((c.out_c + c.tile - 1) / c.tile));
  if (c.s == 3)
    correlate_kernel<3><<<grid, kBlock, c.smem, stream>>>(c, in, w, bias, out);
  else if (c.s == 5)
    correlate_kernel<5><<<grid, kBlock, c.smem, stream>>>(c, in, w, bias, out);
  else
    correlate_kernel<0><<<grid, kBlock, c.smem, stream>>>(c, in, w, bias, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void DirectConv::forward(const float* x, const float* w, const float* bias, float* y,
                         cudaStream_t stream) const {
  launch_correlation(fwd_, x, w, bias, y, stream);
}

void DirectConv::backward_data(const float* dy, const float* w, float* dx, cudaStream_t stream) const {
  launch_correlation(bwd_data_, dy, w, nullptr, dx, stream);
}

void DirectConv::backward_filter(const float* x, const float* dy, float* dw, float* db, void* scratch,
                                 cudaStream_t stream) const {
  const FilterGradPlan& p = bwd_filter_;
  float* partial = static_cast<float*>(scratch);
  const dim3 grid(unsigned(p.blocks), unsigned((p.k + p.tile - 1) / p.tile));
  filter_grad_kernel<<<grid, kBlock, p.smem, stream>>>(p, x, dy, partial);
  CUDA_CHECK_LAUNCH();
  const int rows = p.c * p.r * p.s;
  filter_grad_combine_kernel<<<grid_for(int64_t(p.k) * (rows + 1)), kThreads, 0, stream>>>(
      p.blocks, p.k, rows, partial, dw, db);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
