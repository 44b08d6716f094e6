// Our small-layer convolutions as implicit GEMMs (see direct_conv.cuh).
//   conv_gemm_kernel<TM, TN, TX, TY, KS, CH>: block (bm, bn) computes a BM x BN tile of out
//     (BM = TM * TX pixels, BN = TN * TY channels); thread (tx, ty, kg) keeps TM x TN sums, pixels
//     tx, tx + TX, ... (adjacent lanes: adjacent pixels, so loads and stores coalesce) and
//     channels ty * TN ...; the KS thread groups kg take every KS-th row of each chunk (16-64
//     rows) of the sum and are added in group order at the end. Chunks of im2col(in) and B pass through
//     shared memory, the next chunk's loads in flight while this one's FMAs run. The gather's
//     index arithmetic is done once: per pixel (m_tab) and per filter row (kk_tab).
//   filter_gemm_kernel<TM, TN, TX, TY, KS, CH>: block (bkk, bo, split) sums its split's pixels, CH
//     a chunk, into a BO x BKK tile of partial[split] (BO = TM * TX filters, BKK = TN * TY rows of
//     (c, r, s) or the bias); the same register tiling and group split.
//   filter_combine_kernel: `lanes` adjacent threads per (k, c r s | bias) add every lanes-th
//     split's partial sum, then each other's by shuffles in a fixed tree (a single thread adding
//     hundreds of splits one load at a time took longer than the GEMM).
#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/direct_conv.cuh"
#include "kernels/cuda/launch.cuh"
#include "lib/core/relu_formula.h"

namespace trainer::cuda {
namespace {

constexpr int kBlockThreads = 256;
constexpr int kMaxRows = 1024;                      // filter values (C R S or K R S) the gather table holds
constexpr size_t kMaxSplitBytes = size_t(8) << 20;  // partial sums of a split forward / backward-data

struct Tiling {
  int tm, tn, tx, ty, ks;  // thread tile, threads along the tile's two sides, sum-splitting groups
  int ch;                  // rows of the sum a block stages in shared memory at a time (16, 32, 64)
  int rows_side() const { return tm * tx; }
  int cols_side() const { return tn * ty; }
};

// forward / backward-data: rows_side = BM pixels, cols_side = BN channels. Deeper chunks mean
// fewer round trips to memory for the same sum (these grids are too small to hide them behind
// other blocks), at the cost of registers and shared memory.
constexpr Tiling kGemmTilings[] = {
    {4, 4, 16, 16, 1, 16}, {4, 4, 16, 16, 1, 32}, {4, 4, 8, 16, 2, 32},  // BN 64
    {4, 4, 8, 16, 2, 64},  {4, 4, 4, 16, 4, 64},                         //
    {4, 4, 32, 8, 1, 16},  {4, 4, 32, 8, 1, 32},  {4, 4, 16, 8, 2, 32},  // BN 32
    {4, 4, 16, 8, 2, 64},  {4, 4, 8, 8, 4, 64},   {2, 4, 32, 8, 1, 32},  //
    {2, 4, 32, 8, 1, 64},                                                //
    {4, 4, 64, 4, 1, 16},  {4, 4, 32, 4, 2, 16},  {4, 4, 32, 4, 2, 32},  // BN 16
    {4, 4, 16, 4, 4, 64},  {2, 4, 64, 4, 1, 32},                         //
};
// backward-filter: rows_side = BO filters, cols_side = BKK rows of (c r s | bias).
constexpr Tiling kFilterTilings[] = {
    {4, 4, 16, 16, 1, 32}, {4, 4, 16, 8, 2, 64},                       // BO 64
    {4, 4, 8, 16, 2, 32},  {4, 4, 8, 16, 2, 64}, {4, 4, 8, 8, 4, 64},  // BO 32
    {4, 4, 4, 16, 4, 64},  {4, 4, 4, 8, 8, 64},  {4, 4, 4, 8, 8, 32},  // BO 16
};
constexpr int kGemmTilingCount = int(sizeof(kGemmTilings) / sizeof(kGemmTilings[0]));
constexpr int kFilterTilingCount = int(sizeof(kFilterTilings) / sizeof(kFilterTilings[0]));

// kk_tab entry: x = offset of (i, r, s) in the input relative to the pixel's window origin,
// y = r, z = s, w = the filter row in W (wrow). m_tab entry: x = the window origin's offset
// (n, p * sh - top, q * sw - left), y = p * sh - top, z = q * sw - left, w = the output's offset
// (n, o = 0, p, q), -1 past the last pixel.
__device__ __forceinline__ int4 kk_entry(const Im2col& a, int kk, bool transposed, int out_c) {
  const int rs = a.r * a.s, i = kk / rs, rem = kk - i * rs, r = rem / a.s, s = rem - r * a.s;
  const int wrow = transposed ? (i * out_c * rs + (a.r - 1 - r) * a.s + (a.s - 1 - s)) : kk;
  return make_int4(i * a.in_h * a.in_w + r * a.in_w + s, r, s, wrow);
}

__device__ __forceinline__ int4 m_entry(const Im2col& a, int m, int out_c) {
  const int pix = a.oh * a.ow;
  if (m >= a.n * pix) return make_int4(0, 0, 0, -1);
  const int n = m / pix, pq = m - n * pix, p = pq / a.ow, q = pq - p * a.ow;
  const int y0 = p * a.sh - a.top, x0 = q * a.sw - a.left;
  return make_int4((n * a.in_c * a.in_h + y0) * a.in_w + x0, y0, x0, n * out_c * pix + pq);
}

// im2col(in) at the pixel `me` and filter row `ke` (valid entries only); through a relu's mask
// (mask > 0, the stored relu output laid out as `in`) when mask is not null.
__device__ __forceinline__ float gather(const Im2col& a, const float* __restrict__ in, int4 me, int4 ke,
                                        const float* __restrict__ mask = nullptr) {
  const int y = me.y + ke.y, x = me.z + ke.z;
  if (!(y >= 0 && y < a.in_h && x >= 0 && x < a.in_w)) return 0.f;
  const float v = __ldg(in + me.x + ke.x);
  return mask ? relu_grad_from_output(__ldg(mask + me.x + ke.x), v) : v;
}

template <int TM, int TN>
__device__ __forceinline__ void outer_product(float (&acc)[TM][TN], const float (&a)[TM], const float* b) {
  float bv[TN];
  if constexpr (TN == 4) {
    const float4 v = *reinterpret_cast<const float4*>(b);
    bv[0] = v.x;
    bv[1] = v.y;
    bv[2] = v.z;
    bv[3] = v.w;
  } else {
#pragma unroll
    for (int j = 0; j < TN; ++j) bv[j] = b[j];
  }
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], bv[j], acc[i][j]);
}

// This thread's share of one staged chunk: rows kg, kg + KS, ... of `a` (TM values at tx,
// tx + TX, ...: adjacent lanes read adjacent floats) times `b` (TN values from ty * TN).
template <int TM, int TN, int TX, int KS, int kChunk>
__device__ __forceinline__ void chunk_fma(float (&acc)[TM][TN], const float* a, int a_stride, const float* b,
                                          int b_stride, int tx, int ty, int kg) {
#pragma unroll
  for (int u = 0; u < kChunk / KS; ++u) {
    const int row = kg + u * KS;
    float av[TM];
#pragma unroll
    for (int i = 0; i < TM; ++i) av[i] = a[row * a_stride + tx + i * TX];
    outer_product<TM, TN>(acc, av, b + row * b_stride + ty * TN);
  }
}

template <int TM, int TN>
__device__ __forceinline__ void zero(float (&acc)[TM][TN]) {
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.f;
}

// Adds the KS groups' sums into group 0's, in group order, through `red` (shared memory of
// (KS - 1) * TX * TY * TM * TN floats). Returns true in group 0's threads.
template <int TM, int TN, int TX, int TY, int KS>
__device__ __forceinline__ bool reduce_groups(float (&acc)[TM][TN], float* red) {
  constexpr int kTile = TX * TY;
  const int t = threadIdx.x % kTile, kg = threadIdx.x / kTile;
  if constexpr (KS > 1) {
    __syncthreads();  // the chunk buffers `red` may share are read
    if (kg > 0)
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) red[((kg - 1) * TM * TN + i * TN + j) * kTile + t] = acc[i][j];
    __syncthreads();
    if (kg == 0)
      for (int g = 1; g < KS; ++g)
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
          for (int j = 0; j < TN; ++j) acc[i][j] += red[((g - 1) * TM * TN + i * TN + j) * kTile + t];
  }
  return kg == 0;
}

// kMasked: the input is a fused relu's output gradient read through its mask (a template
// parameter: the test in the gather cost the unmasked kernels 2-3% of a small network's step).
template <int TM, int TN, int TX, int TY, int KS, int kChunk, bool kMasked>
__global__ void __launch_bounds__(kBlockThreads)
    conv_gemm_kernel(ConvGemmPlan g, const float* __restrict__ in, const float* __restrict__ w,
                     const float* __restrict__ bias, float* __restrict__ out, const float* __restrict__ mask,
                     bool relu) {
  constexpr int BM = TM * TX, BN = TN * TY;
  constexpr int LA = BM * kChunk / kBlockThreads, LB = kChunk * BN / kBlockThreads;
  static_assert(TX * TY * KS == kBlockThreads && LA >= 1 && LB >= 1 && kBlockThreads % BM == 0, "tiling");
  constexpr int kRed = (KS - 1) * TX * TY * TM * TN;
  constexpr int kBuf = kChunk * (BM + BN);
  __shared__ int4 kk_tab[kMaxRows];
  __shared__ int4 m_tab[BM];
  __shared__ __align__(16) float buf[kRed > kBuf ? kRed : kBuf];
  float* as = buf;                // [kChunk][BM]
  float* bs = buf + kChunk * BM;  // [kChunk][BN]
  const Im2col& a = g.a;
  const int tid = threadIdx.x, m0 = blockIdx.x * BM, o0 = blockIdx.y * BN;
  // This block's rows of the sum: all, or its split's.
  const int k_begin = g.splits > 1 ? int(blockIdx.z) * g.k_per_split : 0;
  const int k_end = g.splits > 1 ? min(a.rows, k_begin + g.k_per_split) : a.rows;
  for (int kk = tid; kk < a.rows; kk += kBlockThreads) kk_tab[kk] = kk_entry(a, kk, g.transposed, g.out_c);
  for (int j = tid; j < BM; j += kBlockThreads) m_tab[j] = m_entry(a, m0 + j, g.out_c);
  __syncthreads();

  // This thread loads im2col elements e = tid + j * 256: all at pixel tid % BM, rows
  // tid / BM + j * (256 / BM) of each chunk.
  const int4 my_m = m_tab[tid % BM];
  float ra[LA], rb[LB];
  auto load = [&](int k0) {
#pragma unroll
    for (int j = 0; j < LA; ++j) {
      const int kk = k0 + tid / BM + j * (kBlockThreads / BM);
      ra[j] = (kk < k_end && my_m.w >= 0) ? gather(a, in, my_m, kk_tab[kk], kMasked ? mask : nullptr) : 0.f;
    }
#pragma unroll
    for (int j = 0; j < LB; ++j) {
      const int e = tid + j * kBlockThreads, o = o0 + e % BN, kk = k0 + e / BN;
      rb[j] = (kk < k_end && o < g.out_c) ? __ldg(w + kk_tab[kk].w + int64_t(o) * g.o_stride) : 0.f;
    }
  };
  const int tx = tid % TX, ty = (tid / TX) % TY, kg = tid / (TX * TY);
  float acc[TM][TN];
  zero(acc);
  load(k_begin);
  for (int k0 = k_begin; k0 < k_end; k0 += kChunk) {
#pragma unroll
    for (int j = 0; j < LA; ++j) as[tid + j * kBlockThreads] = ra[j];  // [e / BM][e % BM]
#pragma unroll
    for (int j = 0; j < LB; ++j) bs[tid + j * kBlockThreads] = rb[j];  // [e / BN][e % BN]
    __syncthreads();
    if (k0 + kChunk < k_end) load(k0 + kChunk);  // in flight during the FMAs below
    chunk_fma<TM, TN, TX, KS, kChunk>(acc, as, BM, bs, BN, tx, ty, kg);
    __syncthreads();
  }
  if (!reduce_groups<TM, TN, TX, TY, KS>(acc, buf)) return;
  const int pix = a.oh * a.ow;
  if (g.splits > 1) {  // partial[z][o][m]: adjacent lanes, adjacent pixels
    const int64_t total = int64_t(a.n) * pix;
    float* part = out + int64_t(blockIdx.z) * g.out_c * total;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int m = m0 + tx + i * TX;
      if (m >= total) continue;
#pragma unroll
      for (int j = 0; j < TN; ++j) {
        const int o = o0 + ty * TN + j;
        if (o < g.out_c) part[int64_t(o) * total + m] = acc[i][j];
      }
    }
    return;
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int4 me = m_tab[tx + i * TX];
    if (me.w < 0) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int o = o0 + ty * TN + j;
      if (o >= g.out_c) continue;
      const float v = acc[i][j] + (bias ? __ldg(bias + o) : 0.f);
      out[me.w + int64_t(o) * pix] = relu ? relu_forward(v) : v;
    }
  }
}

template <int TM, int TN, int TX, int TY, int KS, int kChunk, bool kMasked>
__global__ void __launch_bounds__(kBlockThreads)
    filter_gemm_kernel(FilterGemmPlan g, const float* __restrict__ x, const float* __restrict__ dy,
                       float* __restrict__ partial, const float* __restrict__ mask) {
  constexpr int BO = TM * TX, BKK = TN * TY;
  constexpr int LD = kChunk * BO / kBlockThreads, LX = kChunk * BKK / kBlockThreads;
  static_assert(TX * TY * KS == kBlockThreads && LD >= 1 && LX >= 1 && kBlockThreads % kChunk == 0, "tiling");
  // Padded rows: a thread stores one pixel's values down a column, so adjacent lanes' pixels
  // should fall in different banks: dy's rows by 1 (conflict free; read one float at a time),
  // im2col's by 4 (read as float4, so rows stay 16-byte aligned; 4-way conflicts on the store).
  constexpr int DS = BO + 1, XS = BKK + 4;
  constexpr int kRed = (KS - 1) * TX * TY * TM * TN;
  constexpr int kBuf = kChunk * (DS + XS);
  __shared__ int4 kk_tab[BKK];
  __shared__ __align__(16) float buf[kRed > kBuf ? kRed : kBuf];
  float* ds = buf;                // [kChunk][DS]
  float* xs = buf + kChunk * DS;  // [kChunk][XS]
  const Im2col& a = g.a;
  const int tid = threadIdx.x, kk0 = blockIdx.x * BKK, o0 = blockIdx.y * BO;
  const int pix = a.oh * a.ow, total = a.n * pix;
  const int m_begin = blockIdx.z * g.split_len, m_end = min(total, m_begin + g.split_len);
  for (int j = tid; j < BKK; j += kBlockThreads)
    kk_tab[j] = kk0 + j < a.rows ? kk_entry(a, kk0 + j, false, 0) : make_int4(0, 0, 0, 0);
  __syncthreads();

  // Every load of this thread is at pixel m0 + tid % kChunk of the chunk.
  const int ml = tid % kChunk;
  float rd[LD], rx[LX];
  auto load = [&](int m0) {
    const int m = m0 + ml;
    const bool live = m < m_end;
    const int4 me = m_entry(a, live ? m : 0, g.k);  // me.w: dy's offset of (n, 0, p, q)
#pragma unroll
    for (int j = 0; j < LD; ++j) {
      const int o = o0 + (tid + j * kBlockThreads) / kChunk;
      const int64_t at = me.w + int64_t(o) * pix;
      const float d = (live && o < g.k) ? __ldg(dy + at) : 0.f;
      rd[j] = kMasked && live && o < g.k ? relu_grad_from_output(__ldg(mask + at), d) : d;
    }
#pragma unroll
    for (int j = 0; j < LX; ++j) {
      const int kl = (tid + j * kBlockThreads) / kChunk, kk = kk0 + kl;
      rx[j] = !live || kk > a.rows ? 0.f : kk == a.rows ? 1.f : gather(a, x, me, kk_tab[kl]);
    }
  };
  const int tx = tid % TX, ty = (tid / TX) % TY, kg = tid / (TX * TY);
  float acc[TM][TN];
  zero(acc);
  if (m_begin < m_end) load(m_begin);
  for (int m0 = m_begin; m0 < m_end; m0 += kChunk) {
    // Element e = tid + j * 256 is pixel e % kChunk, column e / kChunk: stored [pixel][column].
#pragma unroll
    for (int j = 0; j < LD; ++j) ds[ml * DS + (tid + j * kBlockThreads) / kChunk] = rd[j];
#pragma unroll
    for (int j = 0; j < LX; ++j) xs[ml * XS + (tid + j * kBlockThreads) / kChunk] = rx[j];
    __syncthreads();
    if (m0 + kChunk < m_end) load(m0 + kChunk);
    chunk_fma<TM, TN, TX, KS, kChunk>(acc, ds, DS, xs, XS, tx, ty, kg);
    __syncthreads();
  }
  if (!reduce_groups<TM, TN, TX, TY, KS>(acc, buf)) return;
  // partial[split][o][kk], kk == rows: the bias
  float* part = partial + int64_t(blockIdx.z) * g.k * (a.rows + 1);
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int o = o0 + tx + i * TX;
    if (o >= g.k) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int kk = kk0 + ty * TN + j;
      if (kk <= a.rows) part[int64_t(o) * (a.rows + 1) + kk] = acc[i][j];
    }
  }
}

__global__ void filter_combine_kernel(int splits, int lanes, int k, int rows,
                                      const float* __restrict__ partial, float* __restrict__ dw,
                                      float* __restrict__ db) {
  const int64_t outputs = int64_t(k) * (rows + 1);
  const int lane = int(threadIdx.x) % lanes;  // lanes: a power of two up to 32
  const int64_t o = int64_t(blockIdx.x) * (blockDim.x / lanes) + threadIdx.x / lanes;
  float sum = 0.f;
  if (o < outputs) {
#pragma unroll 4
    for (int b = lane; b < splits; b += lanes) sum += __ldg(partial + b * outputs + o);
  }
  for (int off = lanes / 2; off > 0; off /= 2) sum += __shfl_down_sync(0xffffffffu, sum, off);
  if (lane != 0 || o >= outputs) return;
  const int64_t kk = o / (rows + 1), row = o - kk * (rows + 1);
  if (row < rows)
    dw[kk * rows + row] = sum;
  else if (db)
    db[kk] = sum;
}

// out[n][o][p][q] = relu?(sum over the splits in order of partial[z][o][m] + bias[o]), m = (n, p, q);
// one thread per output, pixels fastest.
__global__ void gemm_combine_kernel(ConvGemmPlan g, const float* __restrict__ partial,
                                    const float* __restrict__ bias, float* __restrict__ out, bool relu) {
  const int pix = g.a.oh * g.a.ow;
  const int64_t total = int64_t(g.a.n) * pix, outputs = total * g.out_c;
  for (int64_t i = global_index(); i < outputs; i += grid_stride()) {
    const int64_t o = i / total, m = i - o * total;
    float sum = 0.f;
    for (int z = 0; z < g.splits; ++z) sum += __ldg(partial + int64_t(z) * outputs + i);
    if (bias) sum += __ldg(bias + o);
    const int64_t n = m / pix;
    out[(n * g.out_c + o) * pix + (m - n * pix)] = relu ? relu_forward(sum) : sum;
  }
}

// The 3x3 correlation (direct_conv.cuh): thread t is (n, row group, column x) of
// n * ceil(H / TR) * W, for output channels [CO blockIdx.y, + CO); it keeps rows TR g .. + TR - 1 of
// column x. Filters of CC input channels at a time in shared memory, [i][r s][o].
struct Plane3x3 {
  int co, tr, threads;  // threads: a block's (128: twice the blocks, for grids of a few per SM)
};
constexpr Plane3x3 kPlane3x3[] = {{4, 2, 256},  {8, 2, 256}, {4, 4, 256},  {8, 4, 256}, {16, 2, 256},
                                  {16, 4, 256}, {8, 4, 128}, {16, 2, 128}, {16, 4, 128}};
constexpr int kPlane3x3Count = int(sizeof(kPlane3x3) / sizeof(kPlane3x3[0]));
constexpr int kPlaneChannels = 8;  // CC

template <int CO, int TR, int BT, bool kMasked>
__global__ void __launch_bounds__(BT)
    conv3x3_kernel(ConvGemmPlan g, const float* __restrict__ in, const float* __restrict__ w,
                   const float* __restrict__ bias, float* __restrict__ out, const float* __restrict__ mask,
                   bool relu) {
  constexpr int CC = kPlaneChannels;
  __shared__ __align__(16) float ws[CC * 9 * CO];
  const int H = g.a.in_h, W = g.a.in_w, C = g.a.in_c, K = g.out_c;
  const int groups = (H + TR - 1) / TR, per_image = groups * W;
  const int t = int(blockIdx.x) * BT + int(threadIdx.x);
  const bool live = t < g.a.n * per_image;
  const int n = t / per_image, rem = t - n * per_image, grp = rem / W, x = rem - grp * W, y0 = grp * TR;
  const int o0 = int(blockIdx.y) * CO;
  const bool left = x > 0, right = x + 1 < W;
  const int64_t plane = int64_t(H) * W;
  const int64_t image = live ? int64_t(n) * C * plane : 0;
  float acc[TR][CO];
  zero(acc);
  for (int i0 = 0; i0 < C; i0 += CC) {
    __syncthreads();  // the previous channels' filters are read
    for (int e = int(threadIdx.x); e < CC * 9 * CO; e += BT) {
      const int o = e % CO, irs = e / CO, i = irs / 9, rs = irs - i * 9, ci = i0 + i, oo = o0 + o;
      // forward: W[o][ci][r][s]; backward-data: W[ci][o][2 - r][2 - s] (flipped, transposed)
      const int64_t at =
          g.transposed ? (int64_t(ci) * K + oo) * 9 + (8 - rs) : (int64_t(oo) * C + ci) * 9 + rs;
      ws[e] = ci < C && oo < K ? __ldg(w + at) : 0.f;
    }
    __syncthreads();
    if (!live) continue;
    const int channels = min(CC, C - i0);
    for (int i = 0; i < channels; ++i) {
      const int64_t base = image + int64_t(i0 + i) * plane;
      float v[TR + 2][3];
#pragma unroll
      for (int rr = 0; rr < TR + 2; ++rr) {
        const int yy = y0 - 1 + rr;
        const bool row = yy >= 0 && yy < H;
        const int64_t at = base + int64_t(yy) * W + x;
        const auto value = [&](bool ok, int64_t a) {
          if (!ok) return 0.f;
          const float d = __ldg(in + a);
          return kMasked ? relu_grad_from_output(__ldg(mask + a), d) : d;
        };
        v[rr][0] = value(row && left, at - 1);
        v[rr][1] = value(row, at);
        v[rr][2] = value(row && right, at + 1);
      }
      const float* wi = ws + i * 9 * CO;
#pragma unroll
      for (int r = 0; r < 3; ++r)
#pragma unroll
        for (int s = 0; s < 3; ++s) {
          const float* wv = wi + (r * 3 + s) * CO;
#pragma unroll
          for (int o = 0; o < CO; o += 4) {
            const float4 q = *reinterpret_cast<const float4*>(wv + o);
#pragma unroll
            for (int j = 0; j < TR; ++j) {
              const float a = v[j + r][s];
              acc[j][o] = fmaf(a, q.x, acc[j][o]);
              acc[j][o + 1] = fmaf(a, q.y, acc[j][o + 1]);
              acc[j][o + 2] = fmaf(a, q.z, acc[j][o + 2]);
              acc[j][o + 3] = fmaf(a, q.w, acc[j][o + 3]);
            }
          }
        }
    }
  }
  if (!live) return;
#pragma unroll
  for (int o = 0; o < CO; ++o) {
    const int oo = o0 + o;
    if (oo >= K) continue;
    const float b = bias ? __ldg(bias + oo) : 0.f;
    float* dst = out + (int64_t(n) * K + oo) * plane + x;
#pragma unroll
    for (int j = 0; j < TR; ++j) {
      if (y0 + j >= H) continue;
      const float v = acc[j][o] + b;
      dst[int64_t(y0 + j) * W] = relu ? relu_forward(v) : v;
    }
  }
}

// A forward or backward-data launcher (the GEMM tilings' and the 3x3 correlation's), by index.
using GemmLaunch = void (*)(const ConvGemmPlan&, const float*, const float*, const float*, float*,
                            const float*, bool, cudaStream_t);

template <int I>
void launch_plane3x3(const ConvGemmPlan& p, const float* in, const float* w, const float* bias, float* out,
                     const float* mask, bool relu, cudaStream_t stream) {
  constexpr Plane3x3 t = kPlane3x3[I];
  const dim3 grid(unsigned(p.grid_m), unsigned(p.grid_n));
  if (mask)
    conv3x3_kernel<t.co, t.tr, t.threads, true>
        <<<grid, t.threads, 0, stream>>>(p, in, w, bias, out, mask, relu);
  else
    conv3x3_kernel<t.co, t.tr, t.threads, false>
        <<<grid, t.threads, 0, stream>>>(p, in, w, bias, out, nullptr, relu);
}

// Launchers by tiling index: one instantiation per table entry.
using FilterLaunch = void (*)(const FilterGemmPlan&, const float*, const float*, float*, const float*,
                              cudaStream_t);

template <int I>
void launch_gemm(const ConvGemmPlan& p, const float* in, const float* w, const float* bias, float* out,
                 const float* mask, bool relu, cudaStream_t stream) {
  constexpr Tiling t = kGemmTilings[I];
  const dim3 grid(unsigned(p.grid_m), unsigned(p.grid_n), unsigned(p.splits));
  if (mask)
    conv_gemm_kernel<t.tm, t.tn, t.tx, t.ty, t.ks, t.ch, true>
        <<<grid, kBlockThreads, 0, stream>>>(p, in, w, bias, out, mask, relu);
  else
    conv_gemm_kernel<t.tm, t.tn, t.tx, t.ty, t.ks, t.ch, false>
        <<<grid, kBlockThreads, 0, stream>>>(p, in, w, bias, out, nullptr, relu);
}

template <int I>
void launch_filter(const FilterGemmPlan& p, const float* x, const float* dy, float* partial,
                   const float* mask, cudaStream_t stream) {
  constexpr Tiling t = kFilterTilings[I];
  const dim3 grid(unsigned(p.grid_kk), unsigned(p.grid_o), unsigned(p.splits));
  if (mask)
    filter_gemm_kernel<t.tm, t.tn, t.tx, t.ty, t.ks, t.ch, true>
        <<<grid, kBlockThreads, 0, stream>>>(p, x, dy, partial, mask);
  else
    filter_gemm_kernel<t.tm, t.tn, t.tx, t.ty, t.ks, t.ch, false>
        <<<grid, kBlockThreads, 0, stream>>>(p, x, dy, partial, nullptr);
}

template <size_t... I>
constexpr auto gemm_launchers(std::index_sequence<I...>) {
  return std::array<GemmLaunch, sizeof...(I)>{launch_gemm<int(I)>...};
}
template <size_t... I>
constexpr auto filter_launchers(std::index_sequence<I...>) {
  return std::array<FilterLaunch, sizeof...(I)>{launch_filter<int(I)>...};
}
const auto kGemmLaunch = gemm_launchers(std::make_index_sequence<kGemmTilingCount>{});
const auto kFilterLaunch = filter_launchers(std::make_index_sequence<kFilterTilingCount>{});
template <size_t... I>
constexpr auto plane_launchers(std::index_sequence<I...>) {
  return std::array<GemmLaunch, sizeof...(I)>{launch_plane3x3<int(I)>...};
}
const auto kPlaneLaunch = plane_launchers(std::make_index_sequence<kPlane3x3Count>{});

// The 3x3 correlation's tilings for a gather of 3x3, stride 1, padding 1, the output the size of
// the input: those whose channel group suits the output channels (as side_wanted) and whose grid
// has at least one block an SM. Small layers only, as the GEMM tilings (kMaxRows values a filter):
// cuDNN wins the wide ones, and timing candidates that lose lengthens the cold first step.
void plan_plane3x3(const ConvGemmPlan& base, int sms, std::vector<ConvGemmPlan>& out) {
  const Im2col& a = base.a;
  if (a.r != 3 || a.s != 3 || a.sh != 1 || a.sw != 1 || a.top != 1 || a.left != 1 || a.oh != a.in_h ||
      a.ow != a.in_w || base.out_c <= 0 || a.rows > kMaxRows)
    return;
  for (int i = 0; i < kPlane3x3Count; ++i) {
    const Plane3x3& t = kPlane3x3[i];
    if (t.co > 4 && t.co / 2 >= base.out_c) continue;  // half the group would be idle
    ConvGemmPlan p = base;
    p.plane3x3 = true;
    p.tiling = i;
    const int64_t threads = int64_t(a.n) * ((a.in_h + t.tr - 1) / t.tr) * a.in_w;
    p.grid_m = int((threads + t.threads - 1) / t.threads);
    p.grid_n = (base.out_c + t.co - 1) / t.co;
    if (p.grid_n > 65535 || int64_t(p.grid_m) * p.grid_n < sms) continue;
    // 128-thread blocks only where 256 would leave SMs idle (under two blocks an SM).
    if (t.threads < kBlockThreads &&
        int64_t((threads + kBlockThreads - 1) / kBlockThreads) * p.grid_n >= 2 * sms)
      continue;
    out.push_back(p);
  }
}

// The channel-side tile sizes worth timing for `channels` outputs: the smallest of 16, 32, 64
// that covers them (64 past 64) and the one below it (more blocks, a second tile).
bool side_wanted(int side, int channels) {
  int cover = 64;
  for (int s : {16, 32, 64})
    if (s >= channels) {
      cover = s;
      break;
    }
  return side == cover || side == cover / 2;
}

bool fits_int(const DirectConvGeometry& g) {
  const int64_t big = int64_t(1) << 30;
  return g.n * g.c * g.h * g.w < big && g.n * g.k * g.oh * g.ow < big && g.k * g.c * g.r * g.s < big;
}

// Every tiling that suits the channel count, each also split over the sum when its grid has
// fewer than two blocks an SM (into about two blocks an SM, whole chunks a split, at most
// kMaxSplitBytes of partial sums).
std::vector<ConvGemmPlan> plan_gemm(const ConvGemmPlan& base, int sms) {
  std::vector<ConvGemmPlan> out;
  const int64_t m = int64_t(base.a.n) * base.a.oh * base.a.ow;
  if (base.a.rows <= 0 || base.a.rows > kMaxRows || m <= 0 || base.out_c <= 0) return out;
  for (int i = 0; i < kGemmTilingCount; ++i) {
    const Tiling& t = kGemmTilings[i];
    if (!side_wanted(t.cols_side(), base.out_c)) continue;
    ConvGemmPlan p = base;
    p.tiling = i;
    p.grid_m = int((m + t.rows_side() - 1) / t.rows_side());
    p.grid_n = (base.out_c + t.cols_side() - 1) / t.cols_side();
    if (p.grid_n > 65535) continue;
    out.push_back(p);
    const int64_t blocks = int64_t(p.grid_m) * p.grid_n, chunks = (base.a.rows + t.ch - 1) / t.ch;
    const int64_t want = std::min<int64_t>(chunks, (2 * int64_t(sms) + blocks - 1) / blocks);
    if (want < 2) continue;
    const int64_t per = (chunks + want - 1) / want;  // chunks a split
    p.k_per_split = int(per * t.ch);
    p.splits = int((chunks + per - 1) / per);
    p.scratch_bytes = size_t(p.splits) * size_t(base.out_c) * size_t(m) * sizeof(float);
    if (p.splits >= 2 && p.scratch_bytes <= kMaxSplitBytes) out.push_back(p);
  }
  return out;
}

}  // namespace

DirectConv::DirectConv(const DirectConvGeometry& g, int device) {
  if (!fits_int(g) || g.n <= 0 || g.oh <= 0 || g.ow <= 0) return;
  int sms = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  sms = std::max(1, sms);

  Im2col x;  // the forward's and the filter gradient's gather
  x.n = int(g.n);
  x.in_c = int(g.c);
  x.in_h = int(g.h);
  x.in_w = int(g.w);
  x.r = int(g.r);
  x.s = int(g.s);
  x.sh = int(g.sh);
  x.sw = int(g.sw);
  x.top = int(g.pad_top);
  x.left = int(g.pad_left);
  x.oh = int(g.oh);
  x.ow = int(g.ow);
  x.rows = int(g.c * g.r * g.s);

  ConvGemmPlan f;
  f.a = x;
  f.out_c = int(g.k);
  f.o_stride = x.rows;
  fwd_ = plan_gemm(f, sms);
  plan_plane3x3(f, sms, fwd_);

  if (g.sh == 1 && g.sw == 1 && g.r - 1 - g.pad_top >= 0 && g.s - 1 - g.pad_left >= 0) {
    // dx = dy (padded by R - 1 - top, S - 1 - left) correlated with the flipped, transposed W.
    ConvGemmPlan b;
    b.a.n = int(g.n);
    b.a.in_c = int(g.k);
    b.a.in_h = int(g.oh);
    b.a.in_w = int(g.ow);
    b.a.r = int(g.r);
    b.a.s = int(g.s);
    b.a.top = int(g.r - 1 - g.pad_top);
    b.a.left = int(g.s - 1 - g.pad_left);
    b.a.oh = int(g.h);
    b.a.ow = int(g.w);
    b.a.rows = int(g.k * g.r * g.s);
    b.out_c = int(g.c);
    b.o_stride = int(g.r * g.s);
    b.transposed = true;
    bwd_data_ = plan_gemm(b, sms);
    plan_plane3x3(b, sms, bwd_data_);
  }

  const int64_t m = g.n * g.oh * g.ow, rows = g.c * g.r * g.s;
  if (rows + 1 <= kMaxRows)
    for (int i = 0; i < kFilterTilingCount; ++i) {
      const Tiling& t = kFilterTilings[i];
      if (!side_wanted(t.rows_side(), int(g.k))) continue;
      const int grid_kk = int((rows + 1 + t.cols_side() - 1) / t.cols_side());
      const int grid_o = int((g.k + t.rows_side() - 1) / t.rows_side());
      const int64_t tiles = int64_t(grid_kk) * grid_o;
      if (grid_o > 65535) continue;
      for (int waves : {1, 3}) {  // blocks: about one or three an SM, by splitting the pixels
        FilterGemmPlan p;
        p.a = x;
        p.k = int(g.k);
        p.tiling = i;
        p.grid_kk = grid_kk;
        p.grid_o = grid_o;
        const int64_t want = std::max<int64_t>(1, (int64_t(waves) * sms + tiles - 1) / tiles);
        const int64_t len = ((m + want - 1) / want + t.ch - 1) / t.ch * t.ch;
        p.split_len = int(len);
        p.splits = int(std::min<int64_t>(65535, (m + len - 1) / len));
        if (int64_t(p.splits) * p.split_len < m) continue;
        p.scratch_bytes = size_t(p.splits) * size_t(g.k) * size_t(rows + 1) * sizeof(float);
        if (!bwd_filter_.empty() && bwd_filter_.back().splits == p.splits && bwd_filter_.back().tiling == i)
          continue;  // one wave and three gave the same split
        bwd_filter_.push_back(p);
      }
    }
}

int DirectConv::tilings(Direction d) const {
  return int(d == kForward ? fwd_.size() : d == kBackwardData ? bwd_data_.size() : bwd_filter_.size());
}

void DirectConv::select(Direction d, int index) {
  if (index < 0 || index >= tilings(d))
    throw std::out_of_range("DirectConv::select: tiling " + std::to_string(index) + " of " +
                            std::to_string(tilings(d)));
  selected_[d] = index;
}

std::string DirectConv::describe(Direction d, int index) const {
  if (index < 0 || index >= tilings(d)) return "none";
  if (d == kBackwardFilter) {
    const FilterGemmPlan& p = bwd_filter_[size_t(index)];
    const Tiling& t = kFilterTilings[p.tiling];
    return std::to_string(t.rows_side()) + "x" + std::to_string(t.cols_side()) + " tile, " +
           std::to_string(t.ks) + "-way split in a block, chunks of " + std::to_string(t.ch) + ", " +
           std::to_string(p.splits) + " splits";
  }
  const ConvGemmPlan& p = (d == kForward ? fwd_ : bwd_data_)[size_t(index)];
  if (p.plane3x3) {
    const Plane3x3& t = kPlane3x3[p.tiling];
    return "3x3 correlation, " + std::to_string(t.tr) + " rows x " + std::to_string(t.co) +
           " channels a thread, " + std::to_string(t.threads) + " a block";
  }
  const Tiling& t = kGemmTilings[p.tiling];
  return std::to_string(t.rows_side()) + "x" + std::to_string(t.cols_side()) + " tile, " +
         std::to_string(t.tm) + "x" + std::to_string(t.tn) + " a thread, " + std::to_string(t.ks) +
         "-way split in a block, chunks of " + std::to_string(t.ch) +
         (p.splits > 1 ? ", " + std::to_string(p.splits) + " splits" : std::string());
}

size_t DirectConv::scratch_bytes(Direction d) const {
  if (tilings(d) == 0) return 0;
  const size_t i = size_t(selected_[d]);
  return d == kForward        ? fwd_[i].scratch_bytes
         : d == kBackwardData ? bwd_data_[i].scratch_bytes
                              : bwd_filter_[i].scratch_bytes;
}

size_t DirectConv::max_scratch_bytes() const {
  size_t most = 0;
  for (const FilterGemmPlan& p : bwd_filter_) most = std::max(most, p.scratch_bytes);
  for (const auto* plans : {&fwd_, &bwd_data_})
    for (const ConvGemmPlan& p : *plans) most = std::max(most, p.scratch_bytes);
  return most;
}

namespace {

// One GEMM direction: straight into out, or into the scratch's partial sums and then out.
void run_gemm(const ConvGemmPlan& p, const float* in, const float* w, const float* bias, float* out,
              void* scratch, const float* mask, bool relu, cudaStream_t stream) {
  if (p.plane3x3) {
    kPlaneLaunch[size_t(p.tiling)](p, in, w, bias, out, mask, relu, stream);
    CUDA_CHECK_LAUNCH();
    return;
  }
  if (p.splits <= 1) {
    kGemmLaunch[size_t(p.tiling)](p, in, w, bias, out, mask, relu, stream);
    CUDA_CHECK_LAUNCH();
    return;
  }
  float* partial = static_cast<float*>(scratch);
  kGemmLaunch[size_t(p.tiling)](p, in, w, nullptr, partial, mask, false, stream);
  CUDA_CHECK_LAUNCH();
  const int64_t outputs = int64_t(p.a.n) * p.a.oh * p.a.ow * p.out_c;
  gemm_combine_kernel<<<grid_for(outputs), kThreads, 0, stream>>>(p, partial, bias, out, relu);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void DirectConv::forward(const float* x, const float* w, const float* bias, float* y, void* scratch,
                         cudaStream_t stream, bool relu) const {
  run_gemm(fwd_.at(size_t(selected_[kForward])), x, w, bias, y, scratch, nullptr, relu, stream);
}

void DirectConv::backward_data(const float* dy, const float* w, float* dx, void* scratch, cudaStream_t stream,
                               const float* relu_z) const {
  run_gemm(bwd_data_.at(size_t(selected_[kBackwardData])), dy, w, nullptr, dx, scratch, relu_z, false,
           stream);
}

void DirectConv::backward_filter(const float* x, const float* dy, float* dw, float* db, void* scratch,
                                 cudaStream_t stream, const float* relu_z) const {
  const FilterGemmPlan& p = bwd_filter_.at(size_t(selected_[kBackwardFilter]));
  float* partial = static_cast<float*>(scratch);
  kFilterLaunch[size_t(p.tiling)](p, x, dy, partial, relu_z, stream);
  CUDA_CHECK_LAUNCH();
  const int rows = p.a.rows;
  int lanes = 1;  // about four partial sums a thread
  while (lanes < 32 && lanes * 8 <= p.splits) lanes *= 2;
  const int64_t outputs = int64_t(p.k) * (rows + 1);
  const auto blocks = unsigned((outputs * lanes + kThreads - 1) / kThreads);  // one pass, no grid stride
  filter_combine_kernel<<<blocks, kThreads, 0, stream>>>(p.splits, lanes, p.k, rows, partial, dw, db);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
