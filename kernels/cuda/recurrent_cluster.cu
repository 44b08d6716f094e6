#include <cooperative_groups.h>

#include <algorithm>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/recurrent_cell.cuh"
#include "kernels/cuda/recurrent_cluster.cuh"
#include "lib/core/recurrent_formula.h"

namespace cg = cooperative_groups;

namespace trainer::cuda {
namespace {

// The cluster primitives; before Hopper a cluster is one block.
__device__ __forceinline__ unsigned cluster_rank() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return cg::this_cluster().block_rank();
#else
  return 0;
#endif
}
__device__ __forceinline__ void cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cg::this_cluster().sync();
#else
  __syncthreads();
#endif
}
// Block q's copy of the shared array p (p itself for this block).
__device__ __forceinline__ float* peer(float* p, unsigned q) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return cg::this_cluster().map_shared_rank(p, q);
#else
  return p;
#endif
}

struct Geometry {
  int64_t H, U, G, R;  // units, units a block, gates x units, gates x U (the block's rows)
  int gates;
};
__host__ __device__ inline Geometry geometry(const RecurrentPass& p, int blocks) {
  Geometry g;
  g.gates = p.lstm ? 4 : 3;
  g.H = p.units;
  g.U = p.units / blocks;
  g.G = g.gates * g.H;
  g.R = g.gates * g.U;
  return g;
}

// The register kernels: a thread keeps its row (forward) or column (backward) of W_hh in kRegW
// registers, for H <= kRegW, H a multiple of 4 (h and dAh are read 4 at a time), one row a
// thread (R <= kRegRows: about 170 registers a thread).
constexpr int kRegW = 128, kRegRows = 256;
// The shared-memory kernels: at most this many threads (one a row of the block; W_hh's slice in
// 227 KB keeps the rows below about 480).
constexpr int kSmemRows = 512;

// Shared memory, in floats; W_hh's slice only when it is not in registers.
int64_t forward_floats(const Geometry& g, int S, bool regs) {
  return S * g.H + 3 * S * g.U + S * g.R + (regs ? 0 : g.H * g.R);
}
int64_t backward_floats(const Geometry& g, int S, bool regs) {
  return S * g.G + 2 * S * g.R + g.gates * S * g.U + 2 * S * g.U + (regs ? 0 : g.G * g.U);
}

// Shared: hfull (S, H) h_{t-1} of every unit; hown (2, S, U) this block's h, double-buffered; cown
// (S, U); side (S, R) the hidden side b_hh + h_{t-1} W_hh^T of the block's rows (row r = gate r / U,
// unit q U + r % U); unless Regs, wt (H, R) the block's rows of W_hh transposed.
template <int S, bool Regs>
__global__ void __launch_bounds__(Regs ? kRegRows : kSmemRows)
    forward_cluster_kernel(RecurrentPass p, int blocks, RecurrentTensors t0, RecurrentTensors t1) {
  extern __shared__ float sm[];
  const unsigned per_direction = gridDim.x / unsigned(p.directions);  // a multiple of blocks
  const bool reverse = blockIdx.x >= per_direction;
  const RecurrentTensors& T = reverse ? t1 : t0;
  const float* __restrict__ ax = T.ax, * __restrict__ whh = T.w, * __restrict__ bih = T.bih, * __restrict__ bhh = T.bhh;
  float *gate = T.gate, *h = T.h, *state = T.state;
  const Geometry g = geometry(p, blocks);
  const int64_t H = g.H, U = g.U, G = g.G, R = g.R, L = p.length;
  const unsigned q = cluster_rank();
  const int64_t b0 = int64_t(blockIdx.x % per_direction / blocks) * S, u0 = int64_t(q) * U;
  const int sn = int(std::min<int64_t>(S, p.batch - b0));
  float *hfull = sm, *hown = hfull + S * H, *cown = hown + 2 * S * U, *side = cown + S * U,
        *wt = side + S * R;
  float wreg[Regs ? kRegW : 1];
  if (Regs) {
    const int64_t r = threadIdx.x;
    if (r < R) {
      const float* row = whh + ((r / U) * H + u0 + r % U) * H;
#pragma unroll
      for (int j = 0; j < (Regs ? kRegW : 1); ++j) wreg[j] = j < H ? row[j] : 0.f;
    }
  } else {
    for (int64_t e = threadIdx.x; e < H * R; e += blockDim.x) {
      const int64_t j = e / R, r = e % R;
      wt[e] = whh[((r / U) * H + u0 + r % U) * H + j];
    }
  }
  for (int64_t e = threadIdx.x; e < 3 * S * U; e += blockDim.x) hown[e] = 0.f;  // both h buffers and c
  cluster_sync();
  for (int64_t step = 0; step < L; ++step) {
    const int64_t t = reverse ? L - 1 - step : step;
    const int cur = int(step & 1), prev = cur ^ 1;
    // This step's input side, loaded before the products hide its latency.
    float xin[4] = {0.f, 0.f, 0.f, 0.f};
    const int64_t cell = threadIdx.x, s_c = cell / U, u_c = cell % U;
    const bool cells = cell < sn * U;
    if (cells) {
      const int64_t at = ((b0 + s_c) * L + t) * G + u0 + u_c;
      for (int k = 0; k < g.gates; ++k) xin[k] = ax[at + k * H] + bih[k * H + u0 + u_c];
    }
    if (step > 0) {
      for (int64_t e = threadIdx.x; e < S * H; e += blockDim.x) {
        const int64_t s = e / H, j = e % H;
        hfull[e] = peer(hown + prev * S * U, unsigned(j / U))[s * U + j % U];
      }
      __syncthreads();
    }
    for (int64_t r = threadIdx.x; r < R; r += blockDim.x) {
      float acc[S];
#pragma unroll
      for (int s = 0; s < S; ++s) acc[s] = 0.f;
      if (step > 0) {
        if (Regs) {
#pragma unroll
          for (int j = 0; j < (Regs ? kRegW : 1); j += 4) {
            if (j >= H) break;
#pragma unroll
            for (int s = 0; s < S; ++s) {
              const float4 v = *reinterpret_cast<const float4*>(hfull + s * H + j);
              acc[s] += wreg[j] * v.x;
              acc[s] += wreg[j + 1] * v.y;
              acc[s] += wreg[j + 2] * v.z;
              acc[s] += wreg[j + 3] * v.w;
            }
          }
        } else {
          for (int64_t j = 0; j < H; ++j) {
            const float w = wt[j * R + r];
#pragma unroll
            for (int s = 0; s < S; ++s) acc[s] += w * hfull[s * H + j];
          }
        }
      }
      const float bk = bhh[(r / U) * H + u0 + r % U];
#pragma unroll
      for (int s = 0; s < S; ++s) side[s * R + r] = bk + acc[s];
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < sn * U; i += blockDim.x) {
      const int64_t s = i / U, u = i % U, b = b0 + s;
      float x[4] = {xin[0], xin[1], xin[2], xin[3]};
      if (i != cell) {  // more cells than threads: load here
        const int64_t at = (b * L + t) * G + u0 + u;
        for (int k = 0; k < g.gates; ++k) x[k] = ax[at + k * H] + bih[k * H + u0 + u];
      }
      const float* sd = side + s * R + u;
      const int64_t at = (b * L + t) * G + u0 + u, o = (b * L + t) * H + u0 + u;
      if (p.ids && p.ids[b * L + t] == 0.f) {  // padding: h and c pass through
        const float hv = hown[prev * S * U + i];
        hown[cur * S * U + i] = hv;
        h[o] = hv;
        state[o] = p.lstm ? cown[i] : 0.f;
        for (int k = 0; k < g.gates; ++k) gate[at + k * H] = 0.f;
        continue;
      }
      float gv[4], hv;
      if (p.lstm) {
        float c;
        lstm_cell_forward(x[0] + sd[0], x[1] + sd[U], x[2] + sd[2 * U], x[3] + sd[3 * U], cown[i], gv, c, hv);
        cown[i] = c;
        state[o] = c;
      } else {
        gru_cell_forward(x[0], x[1], x[2], sd[0], sd[U], sd[2 * U], hown[prev * S * U + i], gv, hv);
        state[o] = sd[2 * U];
      }
      hown[cur * S * U + i] = hv;
      h[o] = hv;
      for (int k = 0; k < g.gates; ++k) gate[at + k * H] = gv[k];
    }
    cluster_sync();  // h_t visible to the cluster; every block is done reading h_{t-1}
  }
}

// Shared: dfull (S, G) every row's hidden-side gradients of this step; dahown (2, S, R) the block's
// rows', double-buffered; part (gates, S, U); dh, dc (S, U); unless Regs, wc (G, U) the columns
// of W_hh the block's units feed (wc[k U + u] = W_hh[k][q U + u]).
template <int S, bool Regs>
__global__ void __launch_bounds__(Regs ? kRegRows : kSmemRows)
    backward_cluster_kernel(RecurrentPass p, int blocks, RecurrentTensors t0, RecurrentTensors t1,
                            const float* __restrict__ dy, int64_t out, bool seq) {
  extern __shared__ float sm[];
  const unsigned per_direction = gridDim.x / unsigned(p.directions);  // a multiple of blocks
  const bool reverse = blockIdx.x >= per_direction;
  const RecurrentTensors& T = reverse ? t1 : t0;
  const float* __restrict__ gate = T.gate, * __restrict__ h = T.h, * __restrict__ state = T.state, * __restrict__ whh = T.w;
  float *dax = T.dax, *dah_out = T.dah;
  const Geometry g = geometry(p, blocks);
  const int64_t H = g.H, U = g.U, G = g.G, R = g.R, L = p.length, column = reverse ? g.H : 0;
  const unsigned q = cluster_rank();
  const int64_t b0 = int64_t(blockIdx.x % per_direction / blocks) * S, u0 = int64_t(q) * U;
  const int sn = int(std::min<int64_t>(S, p.batch - b0));
  float *dfull = sm, *dahown = dfull + S * G, *part = dahown + 2 * S * R, *dh = part + g.gates * S * U,
        *dc = dh + S * U, *wc = dc + S * U;
  float wreg[Regs ? kRegW : 1];
  if (Regs) {
    const int64_t item = threadIdx.x;
    if (item < R) {
      const float* col = whh + (item / U) * H * H + u0 + item % U;
#pragma unroll
      for (int kk = 0; kk < (Regs ? kRegW : 1); ++kk) wreg[kk] = kk < H ? col[kk * H] : 0.f;
    }
  } else {
    for (int64_t e = threadIdx.x; e < G * U; e += blockDim.x) wc[e] = whh[(e / U) * H + u0 + e % U];
  }
  for (int64_t e = threadIdx.x; e < 2 * S * R; e += blockDim.x) dahown[e] = 0.f;
  for (int64_t e = threadIdx.x; e < 2 * S * U; e += blockDim.x) dh[e] = 0.f;  // dh and dc
  __syncthreads();
  for (int64_t step = L - 1; step >= 0; --step) {
    const int64_t t = reverse ? L - 1 - step : step, tp = reverse ? t + 1 : t - 1;
    const bool first = step == 0, last = step == L - 1;
    const int cur = int(step & 1);
    float* mine = dahown + cur * S * R;
    for (int64_t i = threadIdx.x; i < sn * U; i += blockDim.x) {
      const int64_t s = i / U, u = i % U;
      cell_backward_unit(p, gate, h, state, dy, out, column, seq, first, last, b0 + s, t, tp, u0 + u, H,
                         g.gates, dh[i], dc[i], dax, dah_out, mine + s * R + u, U);
    }
    if (first) break;
    cluster_sync();  // every block's dAh_t visible
    for (int64_t e = threadIdx.x; e < S * G; e += blockDim.x) {
      const int64_t s = e / G, k = e % G, gt = k / H, j = k % H;
      dfull[e] = peer(mine, unsigned(j / U))[s * R + gt * U + j % U];
    }
    __syncthreads();
    // part[r][s][u] = sum over gate r's rows k of dAh[s][k] W_hh[k][q U + u].
    for (int64_t item = threadIdx.x; item < g.gates * U; item += blockDim.x) {
      const int64_t r = item / U, u = item % U;
      float acc[S];
#pragma unroll
      for (int s = 0; s < S; ++s) acc[s] = 0.f;
      const float* d = dfull + r * H;
      if (Regs) {
#pragma unroll
        for (int kk = 0; kk < (Regs ? kRegW : 1); kk += 4) {
          if (kk >= H) break;
#pragma unroll
          for (int s = 0; s < S; ++s) {
            const float4 v = *reinterpret_cast<const float4*>(d + s * G + kk);
            acc[s] += v.x * wreg[kk];
            acc[s] += v.y * wreg[kk + 1];
            acc[s] += v.z * wreg[kk + 2];
            acc[s] += v.w * wreg[kk + 3];
          }
        }
      } else {
        const float* w = wc + r * H * U + u;
        for (int64_t kk = 0; kk < H; ++kk) {
          const float wv = w[kk * U];
#pragma unroll
          for (int s = 0; s < S; ++s) acc[s] += d[s * G + kk] * wv;
        }
      }
#pragma unroll
      for (int s = 0; s < S; ++s) part[(r * S + s) * U + u] = acc[s];
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < S * U; i += blockDim.x) {
      const int64_t s = i / U, u = i % U;
      float v = dh[i];
      for (int r = 0; r < g.gates; ++r) v += part[(r * S + s) * U + u];
      dh[i] = v;
    }
    __syncthreads();
  }
  cluster_sync();  // no block leaves while another may still read its shared memory
}

// f(S, Regs) as compile-time constants.
template <class F>
void with_variant(int samples, bool regs, F&& f) {
  const auto go = [&](auto s) {
    if (regs)
      f(s, std::true_type{});
    else
      f(s, std::false_type{});
  };
  switch (samples) {
    case 1:
      return go(std::integral_constant<int, 1>{});
    case 2:
      return go(std::integral_constant<int, 2>{});
    case 4:
      return go(std::integral_constant<int, 4>{});
    default:
      return go(std::integral_constant<int, 8>{});
  }
}

int threads_for(const Geometry& g, int S) {
  const int64_t n = std::max(g.R, int64_t(S) * g.U);
  return int(std::min<int64_t>(1024, std::max<int64_t>(32, (n + 31) / 32 * 32)));
}

cudaLaunchConfig_t config(const RecurrentPass& p, const RecurrentCluster& c, size_t smem, cudaStream_t stream,
                          cudaLaunchAttribute* attr) {
  const Geometry g = geometry(p, c.blocks);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned((p.batch + c.samples - 1) / c.samples * c.blocks * p.directions));
  cfg.blockDim = dim3(unsigned(threads_for(g, c.samples)));
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = unsigned(c.blocks);
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = c.blocks > 1 ? 1 : 0;
  return cfg;
}

}  // namespace

RecurrentCluster plan_recurrent_cluster(const RecurrentPass& p, int device) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  const size_t limit = prop.sharedMemPerBlockOptin;
  // W_hh in registers where it fits (H <= 128: the fastest), else in shared memory; the fewest
  // blocks a cluster that hold it.
  for (bool regs : {true, false}) {
    if (regs && (p.units > kRegW || p.units % 4 != 0)) continue;
    for (int blocks : {1, 2, 4, 8}) {
      if (blocks > 1 && prop.major < 9) break;
      if (p.units % blocks != 0) continue;
      const Geometry g = geometry(p, blocks);
      // The fewest batch rows a cluster that still fill the GPU with one wave of clusters.
      int samples = 1;
      while (samples < 8 &&
             (p.batch + samples - 1) / samples * blocks * p.directions > prop.multiProcessorCount)
        samples *= 2;
      if (threads_for(g, samples) > (regs ? kRegRows : kSmemRows)) continue;
      RecurrentCluster c;
      c.blocks = blocks;
      c.samples = samples;
      c.registers = regs;
      c.forward_smem = size_t(forward_floats(g, samples, regs)) * sizeof(float);
      c.backward_smem = size_t(backward_floats(g, samples, regs)) * sizeof(float);
      if (std::max(c.forward_smem, c.backward_smem) > limit) continue;
      bool fits = true;
      with_variant(samples, regs, [&](auto s, auto r) {
        constexpr int S = decltype(s)::value;
        constexpr bool Regs = decltype(r)::value;
        CUDA_CHECK(cudaFuncSetAttribute(forward_cluster_kernel<S, Regs>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, int(c.forward_smem)));
        CUDA_CHECK(cudaFuncSetAttribute(backward_cluster_kernel<S, Regs>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, int(c.backward_smem)));
        if (blocks > 1) {
          cudaLaunchAttribute attr;
          int clusters = 0;
          cudaLaunchConfig_t cfg = config(p, c, c.forward_smem, nullptr, &attr);
          CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, forward_cluster_kernel<S, Regs>, &cfg));
          fits = fits && clusters > 0;
          cfg = config(p, c, c.backward_smem, nullptr, &attr);
          CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, backward_cluster_kernel<S, Regs>, &cfg));
          fits = fits && clusters > 0;
        }
      });
      if (fits) return c;
    }
  }
  return RecurrentCluster{};
}

void launch_recurrent_forward_cluster(const RecurrentPass& p, const RecurrentCluster& c,
                                      const RecurrentTensors* t, cudaStream_t stream) {
  with_variant(c.samples, c.registers, [&](auto s, auto r) {
    constexpr int S = decltype(s)::value;
    constexpr bool Regs = decltype(r)::value;
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = config(p, c, c.forward_smem, stream, &attr);
    CUDA_CHECK(
        cudaLaunchKernelEx(&cfg, forward_cluster_kernel<S, Regs>, p, c.blocks, t[0], t[p.directions - 1]));
  });
}

void launch_recurrent_backward_cluster(const RecurrentPass& p, const RecurrentCluster& c,
                                       const RecurrentTensors* t, const float* dy, int64_t out, bool seq,
                                       cudaStream_t stream) {
  with_variant(c.samples, c.registers, [&](auto s, auto r) {
    constexpr int S = decltype(s)::value;
    constexpr bool Regs = decltype(r)::value;
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = config(p, c, c.backward_smem, stream, &attr);
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, backward_cluster_kernel<S, Regs>, p, c.blocks, t[0],
                                  t[p.directions - 1], dy, out, seq));
  });
}

}  // namespace trainer::cuda
