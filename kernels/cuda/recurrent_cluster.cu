#include <cooperative_groups.h>

#include <algorithm>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
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

// Shared memory, in floats.
int64_t forward_floats(const Geometry& g, int S) { return g.H * g.R + S * g.H + 3 * S * g.U + S * g.R; }
int64_t backward_floats(const Geometry& g, int S) {
  return g.G * g.U + 2 * S * g.R + S * g.G + g.gates * S * g.U + 2 * S * g.U;
}

// Shared: wt (H, R) the block's rows of W_hh transposed (row r = gate r / U, unit q U + r % U);
// hfull (S, H) h_{t-1} of every unit; hown (2, S, U) this block's h, double-buffered; cown (S, U);
// side (S, R) the hidden side b_hh + h_{t-1} W_hh^T of the block's rows.
template <int S>
__global__ void forward_cluster_kernel(RecurrentPass p, int blocks, RecurrentTensors t0,
                                       RecurrentTensors t1) {
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
  float *wt = sm, *hfull = wt + H * R, *hown = hfull + S * H, *cown = hown + 2 * S * U, *side = cown + S * U;
  for (int64_t e = threadIdx.x; e < H * R; e += blockDim.x) {
    const int64_t j = e / R, r = e % R;
    wt[e] = whh[((r / U) * H + u0 + r % U) * H + j];
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
      if (step > 0)
        for (int64_t j = 0; j < H; ++j) {
          const float w = wt[j * R + r];
#pragma unroll
          for (int s = 0; s < S; ++s) acc[s] += w * hfull[s * H + j];
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

// Shared: wc (G, U) the columns of W_hh the block's units feed (wc[k U + u] = W_hh[k][q U + u]);
// dahown (2, S, R) this step's hidden-side gradients of the block's rows, double-buffered; dfull
// (S, G) every row's; part (gates, S, U); dh, dc (S, U).
template <int S>
__global__ void backward_cluster_kernel(RecurrentPass p, int blocks, RecurrentTensors t0, RecurrentTensors t1,
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
  float *wc = sm, *dahown = wc + G * U, *dfull = dahown + 2 * S * R, *part = dfull + S * G,
        *dh = part + g.gates * S * U, *dc = dh + S * U;
  for (int64_t e = threadIdx.x; e < G * U; e += blockDim.x) wc[e] = whh[(e / U) * H + u0 + e % U];
  for (int64_t e = threadIdx.x; e < 2 * S * R; e += blockDim.x) dahown[e] = 0.f;
  for (int64_t e = threadIdx.x; e < 2 * S * U; e += blockDim.x) dh[e] = 0.f;  // dh and dc
  __syncthreads();
  for (int64_t step = L - 1; step >= 0; --step) {
    const int64_t t = reverse ? L - 1 - step : step, tp = reverse ? t + 1 : t - 1;
    const bool first = step == 0, last = step == L - 1;
    const int cur = int(step & 1);
    float* mine = dahown + cur * S * R;
    for (int64_t i = threadIdx.x; i < sn * U; i += blockDim.x) {
      const int64_t s = i / U, u = i % U, b = b0 + s, j = u0 + u;
      const int64_t at = (b * L + t) * G + j, o = (b * L + t) * H + j, ap = (b * L + tp) * H + j;
      float gr = dh[i];
      if (seq)
        gr += dy[(b * L + t) * out + column + j];
      else if (last)
        gr += dy[b * out + column + j];
      float gv[4], da[4];
      for (int k = 0; k < g.gates; ++k) gv[k] = gate[at + k * H];
      float* ds = mine + s * R + u;
      if (p.lstm) {
        float c = dc[i];
        lstm_cell_backward(gv, state[o], first ? 0.f : state[ap], gr, c, da);
        dc[i] = c;
        dh[i] = 0.f;
        for (int k = 0; k < 4; ++k) dax[at + k * H] = ds[k * U] = da[k];
      } else {
        float d2[3], direct;
        gru_cell_backward(gv, state[o], first ? 0.f : h[ap], gr, da, d2, direct);
        dh[i] = direct;
        for (int k = 0; k < 3; ++k) {
          dax[at + k * H] = da[k];
          dah_out[at + k * H] = ds[k * U] = d2[k];
        }
      }
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
      const float* w = wc + r * H * U + u;
      const float* d = dfull + r * H;
      for (int64_t kk = 0; kk < H; ++kk) {
        const float wv = w[kk * U];
#pragma unroll
        for (int s = 0; s < S; ++s) acc[s] += d[s * G + kk] * wv;
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

template <class F>
void with_samples(int samples, F&& f) {
  switch (samples) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    default:
      return f(std::integral_constant<int, 8>{});
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
  for (int blocks : {1, 2, 4, 8}) {
    if (blocks > 1 && prop.major < 9) break;
    if (p.units % blocks != 0) continue;
    const Geometry g = geometry(p, blocks);
    // The fewest batch rows a cluster that still fill the GPU with one wave of clusters.
    int samples = 1;
    while (samples < 8 &&
           (p.batch + samples - 1) / samples * blocks * p.directions > prop.multiProcessorCount)
      samples *= 2;
    RecurrentCluster c;
    c.blocks = blocks;
    c.samples = samples;
    c.forward_smem = size_t(forward_floats(g, samples)) * sizeof(float);
    c.backward_smem = size_t(backward_floats(g, samples)) * sizeof(float);
    if (std::max(c.forward_smem, c.backward_smem) > limit) continue;
    bool fits = true;
    with_samples(samples, [&](auto s) {
      constexpr int S = decltype(s)::value;
      CUDA_CHECK(cudaFuncSetAttribute(forward_cluster_kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      int(c.forward_smem)));
      CUDA_CHECK(cudaFuncSetAttribute(backward_cluster_kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      int(c.backward_smem)));
      if (blocks > 1) {
        cudaLaunchAttribute attr;
        int clusters = 0;
        cudaLaunchConfig_t cfg = config(p, c, c.forward_smem, nullptr, &attr);
        CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, forward_cluster_kernel<S>, &cfg));
        fits = fits && clusters > 0;
        cfg = config(p, c, c.backward_smem, nullptr, &attr);
        CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, backward_cluster_kernel<S>, &cfg));
        fits = fits && clusters > 0;
      }
    });
    if (fits) return c;
  }
  return RecurrentCluster{};
}

void launch_recurrent_forward_cluster(const RecurrentPass& p, const RecurrentCluster& c,
                                      const RecurrentTensors* t, cudaStream_t stream) {
  with_samples(c.samples, [&](auto s) {
    constexpr int S = decltype(s)::value;
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = config(p, c, c.forward_smem, stream, &attr);
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, forward_cluster_kernel<S>, p, c.blocks, t[0], t[p.directions - 1]));
  });
}

void launch_recurrent_backward_cluster(const RecurrentPass& p, const RecurrentCluster& c,
                                       const RecurrentTensors* t, const float* dy, int64_t out, bool seq,
                                       cudaStream_t stream) {
  with_samples(c.samples, [&](auto s) {
    constexpr int S = decltype(s)::value;
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = config(p, c, c.backward_smem, stream, &attr);
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, backward_cluster_kernel<S>, p, c.blocks, t[0], t[p.directions - 1],
                                  dy, out, seq));
  });
}

}  // namespace trainer::cuda
