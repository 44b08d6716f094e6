// Bias add and bias gradient (see bias.cuh).
//   y, dy: (B, F, S)  bias, dbias: (F)
// The gradient: block b sums piece b % parts of channel b / parts (a contiguous range of that
// channel's B * S values, walked as (sample, position) without a division per value), in double,
// then fixed warp-shuffle trees; with parts > 1 a second kernel adds each channel's pieces in
// order.
#include <algorithm>

#include "kernels/cuda/bias.cuh"
#include "kernels/cuda/channel_packs.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/launch.cuh"
#include "lib/core/relu_formula.h"

namespace trainer::cuda {
namespace {

// A thread's values are loaded kLoadsAhead at a time before any is added: a loop that waited for
// each load before the next (the add needs it, the loop's branch kept the compiler from running
// ahead) spent ~22 us on a 200 x 10 x 24 x 24 gradient (mnist_cnn on an H100, ncu), ~50 loads in
// a row per thread. The sums keep their order, so the results are the same bits.
constexpr int kLoadsAhead = 8;

// Index arithmetic in I: 32 bits where the tensor allows (launch.cuh: fits_int32_loop).
template <class T, class I>
__global__ void bias_add_kernel(T* y, const float* bias, I n, I channels, I spatial, bool nhwc, bool relu) {
  const I stride = I(gridDim.x) * I(blockDim.x), first = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x);
  ChannelWalk<I> ch(first, stride, channels, spatial, nhwc);
  for (I i = first; i < n; i += stride, ch.next()) {
    const float v = to_f32(y[i]) + bias[ch.at(i)];
    y[i] = from_f32<T>(relu ? relu_forward(v) : v);
  }
}

// Channels-last (or one position a sample) by packs (channel_packs.cuh): each thread keeps one
// pack of channels, their biases loaded once, over its rows.
template <class T>
__global__ void bias_add_pack_kernel(PackRows r, T* y, const float* bias, bool relu) {
  constexpr int N = kPack<T>;
  const PackCursor p = pack_cursor(r, N);
  if (p.row >= p.end) return;
  float b[N];
#pragma unroll
  for (int k = 0; k < N; ++k) b[k] = bias[p.c0 + k];
  for (int64_t row = p.row; row < p.end; row += p.step) {
    T* at = y + row * r.channels + p.c0;
    Pack<T> v = load_pack(at);
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float f = to_f32(v.v[k]) + b[k];
      v.v[k] = from_f32<T>(relu ? relu_forward(f) : f);
    }
    store_pack(at, v);
  }
}

// The gradient by packs (pack_reduce_kernel): dy's values, one sum.
template <class T>
struct BiasGradPack {
  static constexpr int kSums = 1, N = kPack<T>, kAhead = 4;
  using Acc = double;
  using Loaded = Pack<T>;
  const T* dy;
  __device__ void channel(int64_t) {}
  __device__ Loaded load(int64_t e) const { return load_pack(dy + e); }
  __device__ void add(const Loaded& p, double (&acc)[kSums][N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) acc[0][k] += double(to_f32(p.v[k]));
  }
};
struct BiasGradSink {
  float* dbias;
  double* partial;
  int64_t parts;
  __device__ void operator()(int64_t c, int, int64_t piece, double sum) const {
    if (parts == 1)
      dbias[c] = float(sum);
    else
      partial[c * parts + piece] = sum;
  }
};

// Channels-last: block (tile, piece) sums channels [32 tile, 32 tile + 32) over rows of its piece;
// thread (x, y) = (channel in the tile, row phase mod 8). Fixed order: deterministic.
template <class T>
__global__ void bias_grad_nhwc_kernel(BiasGradSplit s, const T* dy, float* dbias, double* partial) {
  __shared__ double sums[8][32];
  const int tx = int(threadIdx.x % 32), ty = int(threadIdx.x / 32);
  const int64_t c = int64_t(blockIdx.x) * 32 + tx, piece = blockIdx.y;
  const int64_t rows = s.batch * s.spatial, begin = piece * s.part_len;
  const int64_t end = std::min(begin + s.part_len, rows);
  double sum = 0;
  if (c < s.channels)
    for (int64_t r0 = begin + ty; r0 < end; r0 += 8 * kLoadsAhead) {
      float v[kLoadsAhead];  // the loads first, all in flight at once; then the sums in order
#pragma unroll
      for (int u = 0; u < kLoadsAhead; ++u) {
        const int64_t r = r0 + 8 * u;
        v[u] = r < end ? to_f32(dy[r * s.channels + c]) : 0.f;
      }
#pragma unroll
      for (int u = 0; u < kLoadsAhead; ++u)
        if (r0 + 8 * u < end) sum += double(v[u]);
    }
  sums[ty][tx] = sum;
  __syncthreads();
  if (ty != 0 || c >= s.channels) return;
  for (int k = 1; k < 8; ++k) sum += sums[k][tx];
  if (s.parts == 1)
    dbias[c] = float(sum);
  else
    partial[c * s.parts + piece] = sum;
}

template <class T>
__global__ void bias_grad_piece_kernel(BiasGradSplit s, const T* dy, float* dbias, double* partial) {
  __shared__ double sums[kThreads / 32];
  const int64_t c = blockIdx.x / s.parts, piece = blockIdx.x % s.parts;
  const int64_t n = s.batch * s.spatial, begin = piece * s.part_len;
  const int64_t end = std::min(begin + s.part_len, n);
  double sum = 0;
  // Values j = begin + threadIdx.x + k * blockDim.x; (sample, position) advanced by adding.
  int64_t j = begin + threadIdx.x;
  int64_t b = j / s.spatial, p = j % s.spatial;
  const int64_t step_b = blockDim.x / s.spatial, step_p = blockDim.x % s.spatial;
  while (j < end) {
    const int64_t j0 = j;
    float v[kLoadsAhead];  // the loads first, all in flight at once; then the sums in order
#pragma unroll
    for (int u = 0; u < kLoadsAhead; ++u) {
      v[u] = j < end ? to_f32(dy[(b * s.channels + c) * s.spatial + p]) : 0.f;
      j += blockDim.x;
      b += step_b;
      p += step_p;
      if (p >= s.spatial) {
        p -= s.spatial;
        ++b;
      }
    }
#pragma unroll
    for (int u = 0; u < kLoadsAhead; ++u)
      if (j0 + int64_t(u) * blockDim.x < end) sum += double(v[u]);
  }
  // Warps first (shuffles), then the 8 warp sums by one warp: one barrier, a fixed order.
  sum = warp_sum(sum);
  if (threadIdx.x % 32 == 0) sums[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x >= 32) return;
  sum = threadIdx.x < kThreads / 32 ? sums[threadIdx.x] : 0.0;
  sum = warp_sum(sum);
  if (threadIdx.x != 0) return;
  if (s.parts == 1)
    dbias[c] = float(sum);
  else
    partial[blockIdx.x] = sum;
}

// One warp per channel: lane l adds pieces l, l + 32, ... in order, then a fixed shuffle tree.
__global__ void bias_grad_combine_kernel(BiasGradSplit s, const double* partial, float* dbias) {
  const int lane = int(threadIdx.x % 32);
  for (int64_t c = global_index() / 32; c < s.channels; c += grid_stride() / 32) {
    double sum = 0;
    for (int64_t p = lane; p < s.parts; p += 32) sum += partial[c * s.parts + p];
    sum = warp_sum(sum);
    if (lane == 0) dbias[c] = float(sum);
  }
}

}  // namespace

void launch_bias_add(DType t, void* y, const float* bias, int64_t batch, int64_t channels, int64_t spatial,
                     bool nhwc, cudaStream_t stream, bool relu) {
  const int64_t n = batch * channels * spatial;
  if (n <= 0) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if ((nhwc || spatial == 1) && packs_fit<T>(channels, {y})) {
      const PackLaunch l = pack_launch<T>(batch * spatial, channels, 8);
      bias_add_pack_kernel<T><<<l.grid, 256, 0, stream>>>(l.rows, static_cast<T*>(y), bias, relu);
      return;
    }
    with_index_type({n}, [&](auto index) {
      using I = decltype(index);
      bias_add_kernel<T, I><<<grid_for(n), kThreads, 0, stream>>>(static_cast<T*>(y), bias, I(n), I(channels),
                                                                  I(spatial), nhwc, relu);
    });
  });
  CUDA_CHECK_LAUNCH();
}

BiasGradSplit bias_grad_split(int64_t batch, int64_t channels, int64_t spatial, bool nhwc, DType t) {
  BiasGradSplit s;
  s.batch = batch;
  s.channels = channels;
  s.spatial = spatial;
  s.nhwc = nhwc;
  const int64_t n = batch * spatial;
  if (nhwc) {  // at least 16 rows a thread (64 left vgg11_bn_cifar's 2x2 layers 32 blocks at batch 256), 32
               // by packs
    const PackTiles tiles = pack_tiles(pack_values(t), channels);
    const RowSplit r = pack_row_split(n, channels, tiles, 32);
    s.parts = r.parts;
    s.part_len = r.part_len;
    return s;
  }
  // One block per channel up to 32K values (a few microseconds; a second kernel would cost more
  // in a small network's step than it saves); beyond that, pieces of at least 64 values a thread,
  // and about 1024 blocks in all at most.
  if (n <= 32768) {
    s.part_len = std::max<int64_t>(1, n);
    return s;
  }
  const int64_t by_size = (n + kThreads * 64 - 1) / (kThreads * 64);
  const int64_t by_blocks = std::max<int64_t>(1, 1024 / std::max<int64_t>(1, channels));
  s.parts = std::max<int64_t>(1, std::min(by_size, by_blocks));
  s.part_len = std::max<int64_t>(1, (n + s.parts - 1) / s.parts);
  return s;
}

size_t bias_grad_scratch_bytes(const BiasGradSplit& s) {
  return s.parts > 1 ? size_t(s.channels * s.parts) * sizeof(double) : 0;
}

void launch_bias_grad(const BiasGradSplit& s, DType t, const void* dy, float* dbias, double* scratch,
                      cudaStream_t stream) {
  if (s.channels <= 0) return;
  if (s.nhwc) {
    const dim3 grid(unsigned((s.channels + 31) / 32), unsigned(s.parts));
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      const T* d = static_cast<const T*>(dy);
      const PackTiles tiles = pack_tiles(kPack<T>, s.channels);
      if (tiles.width > 0 && packs_fit<T>(s.channels, {dy}))
        launch_pack_reduce<T>(tiles, s.batch * s.spatial, s.channels, RowSplit{s.parts, s.part_len},
                              BiasGradPack<T>{d}, BiasGradSink{dbias, scratch, s.parts}, stream);
      else
        bias_grad_nhwc_kernel<T><<<grid, 256, 0, stream>>>(s, d, dbias, scratch);
    });
    CUDA_CHECK_LAUNCH();
  } else {
    with_dtype(t, [&](auto tag) {
      using T = decltype(tag);
      bias_grad_piece_kernel<T><<<unsigned(s.channels * s.parts), kThreads, 0, stream>>>(
          s, static_cast<const T*>(dy), dbias, scratch);
    });
    CUDA_CHECK_LAUNCH();
  }
  if (s.parts == 1) return;
  bias_grad_combine_kernel<<<grid_for(32 * s.channels), kThreads, 0, stream>>>(s, scratch, dbias);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
