#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/recurrent.cuh"
#include "kernels/cuda/recurrent_cell.cuh"
#include "lib/core/recurrent_formula.h"

namespace trainer::cuda {
namespace {

constexpr int kBlock = 512;

int block_threads(int64_t rows) {
  return int(std::min<int64_t>(kBlock, std::max<int64_t>(32, (rows + 31) / 32 * 32)));
}

size_t forward_smem(const RecurrentPass& p) {
  const int64_t h = p.units, g = (p.lstm ? 4 : 3) * h;
  return size_t(p.samples) * size_t(2 * h + g) * sizeof(float);  // h, c, the hidden side
}
size_t backward_smem(const RecurrentPass& p) {
  const int64_t h = p.units, gates = p.lstm ? 4 : 3, g = gates * h;
  return size_t(p.samples) * size_t(2 * h + g + gates * h) * sizeof(float);  // dh, dc, dAh, partials
}

// Block: rows b0 .. b0 + S - 1 of the batch (those past B are computed on zeros and never written).
// Shared: hp (S, H) the carried h, c (S, H) lstm's cell, side (S, G H) the hidden side of the
// pre-activations (b_hh + h_{t-1} W_hh^T).
template <int S>
__global__ void forward_kernel(RecurrentPass p, RecurrentTensors t0, RecurrentTensors t1) {
  extern __shared__ float sm[];
  const unsigned per_direction = gridDim.x / unsigned(p.directions);
  const bool reverse = blockIdx.x >= per_direction;
  const RecurrentTensors& T = reverse ? t1 : t0;
  const float* __restrict__ ax = T.ax, * __restrict__ wt = T.w, * __restrict__ bih = T.bih, * __restrict__ bhh = T.bhh;
  float *gate = T.gate, *h = T.h, *state = T.state;
  const int64_t H = p.units, L = p.length, G = (p.lstm ? 4 : 3) * H,
                b0 = int64_t(blockIdx.x % per_direction) * S;
  const int sn = int(std::min<int64_t>(S, p.batch - b0));
  float *hp = sm, *cc = hp + S * H, *side = cc + S * H;
  for (int64_t i = threadIdx.x; i < S * H; i += blockDim.x) hp[i] = cc[i] = 0.f;
  __syncthreads();
  for (int64_t step = 0; step < L; ++step) {
    const int64_t t = reverse ? L - 1 - step : step;
    const bool first = step == 0;
    for (int64_t k = threadIdx.x; k < G; k += blockDim.x) {
      float acc[S];
#pragma unroll
      for (int s = 0; s < S; ++s) acc[s] = 0.f;
      if (!first) {
        const float* w = wt + k;
        for (int64_t j = 0; j < H; ++j) {
          const float wv = w[j * G];
#pragma unroll
          for (int s = 0; s < S; ++s) acc[s] += wv * hp[s * H + j];
        }
      }
      const float bk = bhh[k];
#pragma unroll
      for (int s = 0; s < S; ++s) side[s * G + k] = bk + acc[s];
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < sn * H; i += blockDim.x) {
      const int64_t s = i / H, j = i % H, b = b0 + s;
      const int64_t at = (b * L + t) * G + j, o = (b * L + t) * H + j;
      if (p.ids && p.ids[b * L + t] == 0.f) {  // padding: h and c pass through
        h[o] = hp[i];
        state[o] = p.lstm ? cc[i] : 0.f;
        for (int k = 0; k < (p.lstm ? 4 : 3); ++k) gate[at + k * H] = 0.f;
        continue;
      }
      const float* sd = side + s * G + j;
      float g[4];
      if (p.lstm) {
        float c, hv;
        const auto pre = [&](int k) { return ax[at + k * H] + bih[k * H + j] + sd[k * H]; };
        lstm_cell_forward(pre(0), pre(1), pre(2), pre(3), cc[i], g, c, hv);
        cc[i] = c;
        hp[i] = hv;
        state[o] = c;
        h[o] = hv;
        for (int k = 0; k < 4; ++k) gate[at + k * H] = g[k];
      } else {
        float hv;
        gru_cell_forward(ax[at] + bih[j], ax[at + H] + bih[H + j], ax[at + 2 * H] + bih[2 * H + j], sd[0],
                         sd[H], sd[2 * H], hp[i], g, hv);
        hp[i] = hv;
        state[o] = sd[2 * H];
        h[o] = hv;
        for (int k = 0; k < 3; ++k) gate[at + k * H] = g[k];
      }
    }
    __syncthreads();
  }
}

// Shared: dh (S, H) the gradient reaching h_t from later steps, dc (S, H) lstm's, dah (S, G H) this
// step's hidden-side gradients, part (gates, S, H) their product with each gate's rows of W_hh.
template <int S>
__global__ void backward_kernel(RecurrentPass p, RecurrentTensors t0, RecurrentTensors t1,
                                const float* __restrict__ dy, int64_t out, bool seq) {
  extern __shared__ float sm[];
  const unsigned per_direction = gridDim.x / unsigned(p.directions);
  const bool reverse = blockIdx.x >= per_direction;
  const RecurrentTensors& T = reverse ? t1 : t0;
  const float* __restrict__ gate = T.gate, * __restrict__ h = T.h, * __restrict__ state = T.state, * __restrict__ whh = T.w;
  float *dax = T.dax, *dah_out = T.dah;
  const int gates = p.lstm ? 4 : 3;
  const int64_t H = p.units, L = p.length, G = gates * H, b0 = int64_t(blockIdx.x % per_direction) * S;
  const int64_t column = reverse ? H : 0;
  const int sn = int(std::min<int64_t>(S, p.batch - b0));
  float *dh = sm, *dc = dh + S * H, *dah = dc + S * H, *part = dah + S * G;
  for (int64_t i = threadIdx.x; i < S * H; i += blockDim.x) dh[i] = dc[i] = 0.f;
  for (int64_t i = threadIdx.x; i < S * G; i += blockDim.x) dah[i] = 0.f;
  __syncthreads();
  for (int64_t step = L - 1; step >= 0; --step) {
    const int64_t t = reverse ? L - 1 - step : step, tp = reverse ? t + 1 : t - 1;
    const bool first = step == 0, last = step == L - 1;
    for (int64_t i = threadIdx.x; i < sn * H; i += blockDim.x) {
      const int64_t s = i / H, j = i % H;
      cell_backward_unit(p, gate, h, state, dy, out, column, seq, first, last, b0 + s, t, tp, j, H, gates,
                         dh[i], dc[i], dax, dah_out, dah + s * G + j, H);
    }
    __syncthreads();
    if (first) break;
    // part[r][s][j] = sum over gate r's rows k of dah[s][k] W_hh[k][j]; then dh += the gates' parts.
    for (int64_t item = threadIdx.x; item < G; item += blockDim.x) {
      const int64_t r = item / H, j = item % H;
      float acc[S];
#pragma unroll
      for (int s = 0; s < S; ++s) acc[s] = 0.f;
      const float* w = whh + r * H * H + j;
      const float* d = dah + r * H;
      for (int64_t kk = 0; kk < H; ++kk) {
        const float wv = w[kk * H];
#pragma unroll
        for (int s = 0; s < S; ++s) acc[s] += d[s * G + kk] * wv;
      }
#pragma unroll
      for (int s = 0; s < S; ++s) part[(r * S + s) * H + j] = acc[s];
    }
    __syncthreads();
    for (int64_t i = threadIdx.x; i < S * H; i += blockDim.x) {
      const int64_t s = i / H, j = i % H;
      float v = dh[i];
      for (int r = 0; r < gates; ++r) v += part[(r * S + s) * H + j];
      dh[i] = v;
    }
    __syncthreads();
  }
}

__global__ void transpose_kernel(const float* a, int64_t rows, int64_t cols, float* at) {
  const int64_t n = rows * cols;
  for (int64_t e = global_index(); e < n; e += grid_stride()) {
    const int64_t r = e / cols, c = e % cols;
    at[c * rows + r] = a[e];
  }
}

__global__ void output_kernel(const float* h, const float* ids, int64_t batch, int64_t length, int64_t units,
                              bool seq, int64_t t_last, float* y, int64_t out, int64_t column) {
  const int64_t rows = seq ? batch * length : batch, n = rows * units;
  for (int64_t e = global_index(); e < n; e += grid_stride()) {
    const int64_t r = e / units, j = e % units;
    const int64_t from = seq ? r : r * length + t_last;  // the row of h
    y[r * out + column + j] = seq && ids && ids[r] == 0.f ? 0.f : h[from * units + j];
  }
}

__global__ void shift_kernel(const float* h, int64_t batch, int64_t length, int64_t units, int64_t step,
                             float* hprev) {
  const int64_t n = batch * length * units;
  for (int64_t e = global_index(); e < n; e += grid_stride()) {
    const int64_t row = e / units, t = row % length, from = t + step;
    hprev[e] = from < 0 || from >= length ? 0.f : h[e + step * units];
  }
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

unsigned blocks_of(const RecurrentPass& p) {
  return unsigned((p.batch + p.samples - 1) / p.samples * p.directions);
}

}  // namespace

int recurrent_samples(int64_t batch, int64_t units) {
  // Each block streams W_hh from L2 every step, so the step's time is L2 latency and fewer blocks
  // do not make it shorter: 2 rows a block was fastest at batch 32 on an H200 (1, 2, 4, 8 rows:
  // 5.5, 4.6, 5.7, 5.7 ms a step of reuters_lstm).
  int s = 2;
  while (s > 1 && s * (2 * units + 8 * units) * 4 > 96 * 1024) s /= 2;
  return s;
}

void prepare_recurrent(const RecurrentPass& p) {
  with_samples(p.samples, [&](auto s) {
    constexpr int S = decltype(s)::value;
    CUDA_CHECK(cudaFuncSetAttribute(forward_kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(forward_smem(p))));
    CUDA_CHECK(cudaFuncSetAttribute(backward_kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(backward_smem(p))));
  });
}

void launch_recurrent_transpose(const float* whh, int64_t rows, int64_t cols, float* wt,
                                cudaStream_t stream) {
  transpose_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(whh, rows, cols, wt);
  CUDA_CHECK_LAUNCH();
}

void launch_recurrent_forward(const RecurrentPass& p, const RecurrentTensors* t, cudaStream_t stream) {
  const int threads = block_threads((p.lstm ? 4 : 3) * p.units);
  with_samples(p.samples, [&](auto s) {
    constexpr int S = decltype(s)::value;
    forward_kernel<S><<<blocks_of(p), threads, forward_smem(p), stream>>>(p, t[0], t[p.directions - 1]);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_recurrent_backward(const RecurrentPass& p, const RecurrentTensors* t, const float* dy,
                               int64_t out, bool seq, cudaStream_t stream) {
  const int threads = block_threads((p.lstm ? 4 : 3) * p.units);
  with_samples(p.samples, [&](auto s) {
    constexpr int S = decltype(s)::value;
    backward_kernel<S>
        <<<blocks_of(p), threads, backward_smem(p), stream>>>(p, t[0], t[p.directions - 1], dy, out, seq);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_recurrent_output(const float* h, const float* ids, int64_t batch, int64_t length, int64_t units,
                             bool seq, int64_t t_last, float* y, int64_t out, int64_t column,
                             cudaStream_t stream) {
  output_kernel<<<grid_for((seq ? batch * length : batch) * units), kThreads, 0, stream>>>(
      h, ids, batch, length, units, seq, t_last, y, out, column);
  CUDA_CHECK_LAUNCH();
}

void launch_recurrent_shift(const float* h, int64_t batch, int64_t length, int64_t units, int64_t step,
                            float* hprev, cudaStream_t stream) {
  shift_kernel<<<grid_for(batch * length * units), kThreads, 0, stream>>>(h, batch, length, units, step,
                                                                          hprev);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
