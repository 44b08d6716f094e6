#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/layer_norm.cuh"

namespace trainer::cuda {
namespace {

constexpr int kRowThreads = 256;
constexpr int64_t kChunkRows = 32;  // rows a chunk of the parameter gradients sums, at least

// The sum of v over the block (kRowThreads threads); every thread gets it.
__device__ float block_sum(float v, float* shared) {
  v = warp_sum(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // shared may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float total = 0.f;
  for (int k = 0; k < kRowThreads / 32; ++k) total += shared[k];  // in order: the same on every thread
  return total;
}

template <class T>
__global__ void layer_norm_forward_kernel(const T* x, const float* w, const float* b, T* y, float* stats,
                                          int64_t d, float eps, bool rms) {
  __shared__ float shared[kRowThreads / 32];
  const int64_t r = blockIdx.x;
  const T* xr = x + r * d;
  float mean = 0.f;
  if (!rms) {
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < d; j += kRowThreads) s += to_f32(xr[j]);
    mean = block_sum(s, shared) / float(d);
  }
  float sq = 0.f;
  for (int64_t j = threadIdx.x; j < d; j += kRowThreads) {
    const float c = to_f32(xr[j]) - mean;
    sq += c * c;
  }
  const float inv = rsqrtf(block_sum(sq, shared) / float(d) + eps);
  if (threadIdx.x == 0) {
    stats[2 * r] = mean;
    stats[2 * r + 1] = inv;
  }
  T* yr = y + r * d;
  for (int64_t j = threadIdx.x; j < d; j += kRowThreads)
    yr[j] = from_f32<T>((to_f32(xr[j]) - mean) * inv * w[j] + (b ? b[j] : 0.f));
}

template <class T>
__global__ void layer_norm_dx_kernel(const T* x, const T* dy, const float* w, const float* stats, T* dx,
                                     int64_t d, bool rms) {
  __shared__ float shared[kRowThreads / 32];
  const int64_t r = blockIdx.x;
  const T *xr = x + r * d, *dyr = dy + r * d;
  const float mean = stats[2 * r], inv = stats[2 * r + 1];
  float sg = 0.f, sgx = 0.f;
  for (int64_t j = threadIdx.x; j < d; j += kRowThreads) {
    const float g = to_f32(dyr[j]) * w[j];
    sg += g;
    sgx += g * (to_f32(xr[j]) - mean) * inv;
  }
  const float mean_g = rms ? 0.f : block_sum(sg, shared) / float(d);
  const float mean_gx = block_sum(sgx, shared) / float(d);
  T* dxr = dx + r * d;
  for (int64_t j = threadIdx.x; j < d; j += kRowThreads) {
    const float xhat = (to_f32(xr[j]) - mean) * inv;
    dxr[j] = from_f32<T>(inv * (to_f32(dyr[j]) * w[j] - mean_g - xhat * mean_gx));
  }
}

// Block (column tile, chunk): each thread one column, the chunk's rows in order.
template <class T>
__global__ void layer_norm_param_partials_kernel(const T* x, const T* dy, const float* stats, float* partials,
                                                 int64_t rows, int64_t d, int64_t chunk_rows) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, chunk = blockIdx.y;
  if (j >= d) return;
  const int64_t r0 = chunk * chunk_rows, r1 = r0 + chunk_rows < rows ? r0 + chunk_rows : rows;
  float sw = 0.f, sb = 0.f;
  for (int64_t r = r0; r < r1; ++r) {
    const float g = to_f32(dy[r * d + j]);
    sw += g * (to_f32(x[r * d + j]) - stats[2 * r]) * stats[2 * r + 1];
    sb += g;
  }
  partials[(chunk * 2) * d + j] = sw;
  partials[(chunk * 2 + 1) * d + j] = sb;
}

__global__ void layer_norm_param_total_kernel(const float* partials, float* dw, float* db, int64_t chunks,
                                              int64_t d) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= d) return;
  float sw = 0.f, sb = 0.f;
  for (int64_t c = 0; c < chunks; ++c) {
    sw += partials[(c * 2) * d + j];
    sb += partials[(c * 2 + 1) * d + j];
  }
  dw[j] = sw;
  if (db) db[j] = sb;
}

int64_t chunk_rows(int64_t rows, int64_t d) {
  const int64_t tiles = (d + kThreads - 1) / kThreads;
  const int64_t chunks = std::max<int64_t>(1, std::min((rows + kChunkRows - 1) / kChunkRows, 1024 / tiles));
  return (rows + chunks - 1) / chunks;
}

}  // namespace

int64_t layer_norm_chunks(int64_t rows, int64_t d) {
  const int64_t per = chunk_rows(rows, d);
  return (rows + per - 1) / per;
}

void launch_layer_norm_forward(DType t, const void* x, const float* w, const float* b, void* y, float* stats,
                               int64_t rows, int64_t d, float eps, bool rms, cudaStream_t stream) {
  if (rows == 0) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    layer_norm_forward_kernel<T><<<unsigned(rows), kRowThreads, 0, stream>>>(
        static_cast<const T*>(x), w, b, static_cast<T*>(y), stats, d, eps, rms);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_layer_norm_backward(DType t, const void* x, const void* dy, const float* w, const float* stats,
                                void* dx, float* dw, float* db, float* partials, int64_t rows, int64_t d,
                                bool rms, cudaStream_t stream) {
  if (rows == 0) return;
  const int64_t per = chunk_rows(rows, d), chunks = (rows + per - 1) / per;
  const dim3 tiles(unsigned((d + kThreads - 1) / kThreads), unsigned(chunks));
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    const T *xt = static_cast<const T*>(x), *dyt = static_cast<const T*>(dy);
    layer_norm_param_partials_kernel<T>
        <<<tiles, kThreads, 0, stream>>>(xt, dyt, stats, partials, rows, d, per);
    CUDA_CHECK_LAUNCH();
    layer_norm_param_total_kernel<<<tiles.x, kThreads, 0, stream>>>(partials, dw, db, chunks, d);
    CUDA_CHECK_LAUNCH();
    if (!dx) return;
    layer_norm_dx_kernel<T>
        <<<unsigned(rows), kRowThreads, 0, stream>>>(xt, dyt, w, stats, static_cast<T*>(dx), d, rms);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace trainer::cuda
