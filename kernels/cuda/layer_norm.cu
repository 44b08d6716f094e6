// A row lives in the registers of a group of W warps (one warp up to 1024 bf16 or 512 f32
// columns, up to 8 for 8192 or 4096): each thread holds NV slots of kVec<T> elements (16 bytes).
// Where every row starts 16-byte aligned (aligned pointers, d a multiple of kVec<T>) a slot is one
// 16-byte load or store; otherwise kVec<T> scalars, each a coalesced column across the group. A
// group's warps meet at their own named barrier. Wider rows take a block each and read the row
// from memory in every pass.
// Forward: x read once, y written once; the mean, then the mean of squared deviations, over the
// registers. Backward: one kernel reads x and dy once, on a fixed grid of blocks, each a fixed
// range of rows (a group a row): it writes dx (adding into it when asked) and sums its rows' dw
// and db terms in registers, then across its groups in shared memory in group order, into its row
// of `partials`; a second kernel sums the blocks' rows per column, 16 warps a 32-column tile, in a
// fixed order. No atomics: the same bits on every run.
// GPT-2 small on an H200, (8192, 768) bf16: forward 7.7 us (3.3 TB/s), backward 15 us + 1.9 us for
// the partials' sum (2.2 TB/s); the block-a-row scalar kernels before took 30 and 59 us. The
// backward is bound by the bytes in flight: the sums take 2 registers an element, which allows two
// blocks a multiprocessor at 3 slots; at 65536 rows it reaches 3.3 TB/s.
#include <cstdint>

#include "kernels/cuda/add.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/layer_norm.cuh"
#include "kernels/cuda/vec16.cuh"

namespace trainer::cuda {
namespace {

constexpr int kBlock = 256;  // threads of every row kernel: 8 warps, 8 / W rows at a time
constexpr int kBlockWarps = kBlock / 32;
constexpr int kTotalWarps = 16;  // warps of the partials' sum, each a share of the blocks
// The backward's grid: at most kMaxBlocks blocks (two resident a multiprocessor on an H200's 132;
// partials: kMaxBlocks * 2 * d floats), of at least kMinBlockRows rows while there are enough.
constexpr int64_t kMaxBlocks = 264;
constexpr int64_t kMinBlockRows = 16;
// Dynamic shared memory a wide backward block sums its columns in, at most (without opting in).
constexpr size_t kWideSharedBytes = 48 * 1024 - 2 * kBlockWarps * sizeof(float);

// Thread t of a row's G threads holds in slot s the columns (s G + t) V + j (VEC: one 16-byte
// vector) or (s V + j) G + t (scalars), j < V = kVec<T>. Columns from d on read as 0 and are not
// written.
template <int V, int G, bool VEC>
__device__ __forceinline__ int column(int s, int j, int t) {
  return VEC ? (s * G + t) * V + j : (s * V + j) * G + t;
}

// Slot s of a row of T, as it is in memory (kept so in registers: 16 bytes a slot).
template <class T, int G, bool VEC>
__device__ __forceinline__ uint4 load_slot(const T* row, int d, int s, int t) {
  constexpr int V = kVec<T>;
  if constexpr (VEC) {
    const int k = s * G + t;
    return k * V < d ? reinterpret_cast<const uint4*>(row)[k] : make_uint4(0u, 0u, 0u, 0u);
  } else {
    float v[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int c = column<V, G, false>(s, j, t);
      v[j] = c < d ? to_f32(row[c]) : 0.f;
    }
    return pack<T>(v);  // exact: the values are T's
  }
}

// Slot s of an f32 parameter (w, b): VEC: V / 4 16-byte loads (the parameter 16-byte aligned).
template <int V, int G, bool VEC>
__device__ __forceinline__ void load_param(const float* p, int d, int s, int t, float (&v)[V]) {
  if constexpr (VEC) {
    const int c = (s * G + t) * V;
#pragma unroll
    for (int i = 0; i < V / 4; ++i) {
      const float4 q = c < d ? reinterpret_cast<const float4*>(p + c)[i] : make_float4(0.f, 0.f, 0.f, 0.f);
      v[4 * i] = q.x;
      v[4 * i + 1] = q.y;
      v[4 * i + 2] = q.z;
      v[4 * i + 3] = q.w;
    }
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int c = column<V, G, false>(s, j, t);
      v[j] = c < d ? p[c] : 0.f;
    }
  }
}

template <class T, int G, bool VEC>
__device__ __forceinline__ void store_slot(T* row, int d, int s, int t, const float (&v)[kVec<T>]) {
  constexpr int V = kVec<T>;
  if constexpr (VEC) {
    const int k = s * G + t;
    if (k * V < d) reinterpret_cast<uint4*>(row)[k] = pack<T>(v);
  } else {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const int c = column<V, G, false>(s, j, t);
      if (c < d) row[c] = from_f32<T>(v[j]);
    }
  }
}

// A barrier for the W warps of this thread's row group only (named barrier 1 + group; 0 is
// __syncthreads'), so that a group waits for no other group's loads.
template <int W>
__device__ __forceinline__ void group_barrier() {
  if constexpr (W == kBlockWarps)
    __syncthreads();
  else
    asm volatile("bar.sync %0, %1;" ::"r"(1 + int(threadIdx.x) / (32 * W)), "r"(32 * W) : "memory");
}

// v summed over a row's group of W warps (threads threadIdx.x / 32W share a row), the warps in
// order; every thread of the group gets the same sums. W > 1: every thread of the group calls it
// (it waits at the group's barrier); scratch holds kBlockWarps * N floats.
template <int W, int N>
__device__ __forceinline__ void row_sum(float (&v)[N], float* scratch) {
#pragma unroll
  for (int n = 0; n < N; ++n) v[n] = warp_sum(v[n]);
  if constexpr (W > 1) {
    const int warp = int(threadIdx.x) / 32, first = warp - warp % W;
    group_barrier<W>();  // the group's reads of the previous call are done
    if (threadIdx.x % 32 == 0)
#pragma unroll
      for (int n = 0; n < N; ++n) scratch[warp * N + n] = v[n];
    group_barrier<W>();
#pragma unroll
    for (int n = 0; n < N; ++n) {
      float s = scratch[first * N + n];
#pragma unroll
      for (int k = 1; k < W; ++k) s += scratch[(first + k) * N + n];
      v[n] = s;
    }
  }
}

// Block of kBlock threads: 8 / W rows, W warps each. d <= 32 W NV kVec<T>.
template <class T, int NV, int W, bool VEC>
__global__ void __launch_bounds__(kBlock)
    layer_norm_forward_rows(const T* x, const T* x2, T* sum, const float* w, const float* b, T* y,
                            float* stats, int64_t rows, int d, float eps, bool rms) {
  constexpr int V = kVec<T>, G = 32 * W, R = kBlock / G;
  __shared__ float scratch[kBlockWarps];
  const int t = int(threadIdx.x) % G;
  const int64_t r = int64_t(blockIdx.x) * R + int(threadIdx.x) / G;
  const bool live = r < rows;  // the same for the group; a dead group still meets the barriers
  const T* xr = x + (live ? r : 0) * d;
  uint4 raw[NV];
#pragma unroll
  for (int s = 0; s < NV; ++s) raw[s] = live ? load_slot<T, G, VEC>(xr, d, s, t) : make_uint4(0u, 0u, 0u, 0u);
  if (x2 && live) {  // the input is x + x2, rounded to T as the add layer rounds it, and written out
    const T* x2r = x2 + r * d;
    T* sr = sum + r * d;  // may be x's or x2's row: this thread read its slots of both above
#pragma unroll
    for (int s = 0; s < NV; ++s) {
      float u[V], v[V];
      unpack<T>(raw[s], u);
      unpack<T>(load_slot<T, G, VEC>(x2r, d, s, t), v);
#pragma unroll
      for (int j = 0; j < V; ++j) u[j] += v[j];
      raw[s] = pack<T>(u);
      store_slot<T, G, VEC>(sr, d, s, t, u);
    }
  }
  float mean = 0.f;
  if (!rms) {
    float sum[1] = {0.f};
#pragma unroll
    for (int s = 0; s < NV; ++s) {
      float v[V];
      unpack<T>(raw[s], v);
#pragma unroll
      for (int j = 0; j < V; ++j) sum[0] += v[j];  // columns past d are 0
    }
    row_sum<W>(sum, scratch);
    mean = sum[0] / float(d);
  }
  float sq[1] = {0.f};
#pragma unroll
  for (int s = 0; s < NV; ++s) {
    float v[V];
    unpack<T>(raw[s], v);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float c = v[j] - mean;
      if (column<V, G, VEC>(s, j, t) < d) sq[0] += c * c;
    }
  }
  row_sum<W>(sq, scratch);
  const float inv = rsqrtf(sq[0] / float(d) + eps);
  if (!live) return;  // no barrier follows
  if (t == 0) {
    stats[2 * r] = mean;
    stats[2 * r + 1] = inv;
  }
  T* yr = y + r * d;
#pragma unroll
  for (int s = 0; s < NV; ++s) {
    float v[V], wv[V], bv[V];
    unpack<T>(raw[s], v);
    load_param<V, G, VEC>(w, d, s, t, wv);
    if (b)
      load_param<V, G, VEC>(b, d, s, t, bv);
    else
#pragma unroll
      for (int j = 0; j < V; ++j) bv[j] = 0.f;
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = (v[j] - mean) * inv * wv[j] + bv[j];
    store_slot<T, G, VEC>(yr, d, s, t, v);
  }
}

// Block b takes rows [b per, (b + 1) per), its groups rows b per + g, + 8 / W, ...; d <= 32 W NV
// kVec<T>. g = dy w, xhat = (x - mean) inv:
//   layer_norm: dx = inv (g - mean(g) - xhat mean(g xhat))   rms_norm: dx = inv (g - xhat mean(g xhat))
// partials[b] = (sum of dy xhat, sum of dy) over the block's rows, (2, d).
template <class T, int NV, int W, bool VEC>
__global__ void __launch_bounds__(kBlock)
    layer_norm_backward_rows(const T* x, const T* dy, const float* w, const float* stats, T* dx,
                             bool accumulate, float* partials, bool bias, int64_t rows, int d, int64_t per,
                             bool rms) {
  constexpr int V = kVec<T>, G = 32 * W, R = kBlock / G;
  __shared__ float scratch[2 * kBlockWarps];
  __shared__ float carry[R > 1 ? 2 * NV * V * G : 1];  // the groups' running sums, (2, NV V G)
  const int t = int(threadIdx.x) % G, group = int(threadIdx.x) / G;
  const int64_t r0 = int64_t(blockIdx.x) * per, r1 = r0 + per < rows ? r0 + per : rows;
  float sw[NV][V], sb[NV][V];
#pragma unroll
  for (int s = 0; s < NV; ++s)
#pragma unroll
    for (int j = 0; j < V; ++j) sw[s][j] = sb[s][j] = 0.f;
  // The same trip count for every group (the barriers in row_sum); a group past r1 loads nothing.
  for (int64_t first = r0; first < r1; first += R) {
    const int64_t r = first + group;
    const bool live = r < r1;
    const int64_t at = (live ? r : r0) * d;
    uint4 xv[NV], gv[NV];
#pragma unroll
    for (int s = 0; s < NV; ++s) {
      xv[s] = live ? load_slot<T, G, VEC>(x + at, d, s, t) : make_uint4(0u, 0u, 0u, 0u);
      gv[s] = live ? load_slot<T, G, VEC>(dy + at, d, s, t) : make_uint4(0u, 0u, 0u, 0u);
    }
    const float mean = live ? stats[2 * r] : 0.f, inv = live ? stats[2 * r + 1] : 0.f;
    float mean_g = 0.f, mean_gx = 0.f;
    if (dx) {
      float sums[2] = {0.f, 0.f};  // g, g xhat; columns past d have dy = 0
#pragma unroll
      for (int s = 0; s < NV; ++s) {
        float xs[V], gs[V], wv[V];
        unpack<T>(xv[s], xs);
        unpack<T>(gv[s], gs);
        load_param<V, G, VEC>(w, d, s, t, wv);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const float g = gs[j] * wv[j];
          sums[0] += g;
          sums[1] += g * ((xs[j] - mean) * inv);
        }
      }
      row_sum<W>(sums, scratch);
      mean_g = rms ? 0.f : sums[0] / float(d);
      mean_gx = sums[1] / float(d);
    }
    if (!live) continue;  // the next trip's barriers: every group meets them again
    T* dxr = dx ? dx + at : nullptr;
#pragma unroll
    for (int s = 0; s < NV; ++s) {
      float xs[V], gs[V];
      unpack<T>(xv[s], xs);
      unpack<T>(gv[s], gs);
#pragma unroll
      for (int j = 0; j < V; ++j) {
        xs[j] = (xs[j] - mean) * inv;  // xhat
        sw[s][j] += gs[j] * xs[j];
        sb[s][j] += gs[j];
      }
      if (dxr) {
        float wv[V], out[V];
        load_param<V, G, VEC>(w, d, s, t, wv);
#pragma unroll
        for (int j = 0; j < V; ++j) out[j] = inv * (gs[j] * wv[j] - mean_g - xs[j] * mean_gx);
        if (accumulate) {
          float old[V];
          unpack<T>(load_slot<T, G, VEC>(dxr, d, s, t), old);
#pragma unroll
          for (int j = 0; j < V; ++j) out[j] += old[j];
        }
        store_slot<T, G, VEC>(dxr, d, s, t, out);
      }
    }
  }
  // The groups' sums in group order: group 0 writes carry, each next adds its own, the last
  // writes the block's row of partials.
  float* pw = partials + int64_t(blockIdx.x) * 2 * d;
  float* pb = pw + d;
#pragma unroll
  for (int g = 0; g < R; ++g) {
    if (group == g) {
#pragma unroll
      for (int s = 0; s < NV; ++s)
#pragma unroll
        for (int j = 0; j < V; ++j) {
          const int c = column<V, G, VEC>(s, j, t), k = (s * V + j) * G + t;  // k: carry's index
          if (c >= d) continue;
          float a = sw[s][j], e = sb[s][j];
          if (g > 0) {
            a = carry[k] + a;
            e = carry[NV * V * G + k] + e;
          }
          if (g + 1 < R) {
            carry[k] = a;
            carry[NV * V * G + k] = e;
          } else {
            pw[c] = a;
            if (bias) pb[c] = e;
          }
        }
    }
    if (g + 1 < R) __syncthreads();
  }
}

// Rows wider than any register shape: a block a row in the forward; a block a range of rows in
// the backward, each thread summing its own columns into the block's row of partials in row order.
template <class T>
__global__ void __launch_bounds__(kBlock)
    layer_norm_forward_wide(const T* x, const float* w, const float* b, T* y, float* stats, int64_t d,
                            float eps, bool rms) {
  __shared__ float scratch[kBlockWarps];
  const int64_t r = blockIdx.x;
  const T* xr = x + r * d;
  float mean = 0.f;
  if (!rms) {
    float sum[1] = {0.f};
#pragma unroll 4
    for (int64_t j = threadIdx.x; j < d; j += kBlock) sum[0] += to_f32(xr[j]);
    row_sum<kBlockWarps>(sum, scratch);
    mean = sum[0] / float(d);
  }
  float sq[1] = {0.f};
#pragma unroll 4
  for (int64_t j = threadIdx.x; j < d; j += kBlock) {
    const float c = to_f32(xr[j]) - mean;
    sq[0] += c * c;
  }
  row_sum<kBlockWarps>(sq, scratch);
  const float inv = rsqrtf(sq[0] / float(d) + eps);
  if (threadIdx.x == 0) {
    stats[2 * r] = mean;
    stats[2 * r + 1] = inv;
  }
  T* yr = y + r * d;
  for (int64_t j = threadIdx.x; j < d; j += kBlock)
    yr[j] = from_f32<T>((to_f32(xr[j]) - mean) * inv * w[j] + (b ? b[j] : 0.f));
}

// SHARED: the block's sums in dynamic shared memory (2 d floats), copied to partials at the end;
// else in partials itself. Either way each thread owns the columns t, t + kBlock, ...: no barrier.
template <class T, bool SHARED>
__global__ void __launch_bounds__(kBlock)
    layer_norm_backward_wide(const T* x, const T* dy, const float* w, const float* stats, T* dx,
                             bool accumulate, float* partials, bool bias, int64_t rows, int64_t d,
                             int64_t per, bool rms) {
  __shared__ float scratch[2 * kBlockWarps];
  extern __shared__ float block_sums[];
  const int64_t r0 = int64_t(blockIdx.x) * per, r1 = r0 + per < rows ? r0 + per : rows;
  float* pw = partials + int64_t(blockIdx.x) * 2 * d;
  float* pb = pw + d;
  float* aw = SHARED ? block_sums : pw;
  float* ab = aw + d;
  for (int64_t r = r0; r < r1; ++r) {
    const T *xr = x + r * d, *dyr = dy + r * d;
    const float mean = stats[2 * r], inv = stats[2 * r + 1];
    float mean_g = 0.f, mean_gx = 0.f;
    if (dx) {
      float sums[2] = {0.f, 0.f};
#pragma unroll 4
      for (int64_t j = threadIdx.x; j < d; j += kBlock) {
        const float g = to_f32(dyr[j]) * w[j];
        sums[0] += g;
        sums[1] += g * ((to_f32(xr[j]) - mean) * inv);
      }
      row_sum<kBlockWarps>(sums, scratch);
      mean_g = rms ? 0.f : sums[0] / float(d);
      mean_gx = sums[1] / float(d);
    }
    T* dxr = dx ? dx + r * d : nullptr;
#pragma unroll 4
    for (int64_t j = threadIdx.x; j < d; j += kBlock) {
      const float g = to_f32(dyr[j]), xhat = (to_f32(xr[j]) - mean) * inv;
      aw[j] = r == r0 ? g * xhat : aw[j] + g * xhat;
      if (bias) ab[j] = r == r0 ? g : ab[j] + g;
      if (dxr) {
        float out = inv * (g * w[j] - mean_g - xhat * mean_gx);
        if (accumulate) out += to_f32(dxr[j]);
        dxr[j] = from_f32<T>(out);
      }
    }
  }
  if (SHARED)
    for (int64_t j = threadIdx.x; j < d; j += kBlock) {
      pw[j] = aw[j];
      if (bias) pb[j] = ab[j];
    }
}

// dw (blockIdx.y 0) or db (1) for a tile of 32 columns: warp k sums blocks k, k + 16, ..., then
// warp 0 the 16 warps' sums in order.
__global__ void __launch_bounds__(32 * kTotalWarps)
    layer_norm_param_total(const float* partials, float* dw, float* db, int64_t blocks, int64_t d) {
  __shared__ float part[kTotalWarps][32];
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32, k = int(blockIdx.y);
  const int64_t j = int64_t(blockIdx.x) * 32 + lane;
  float s = 0.f;
  if (j < d) {
#pragma unroll 4
    for (int64_t c = warp; c < blocks; c += kTotalWarps) s += partials[(2 * c + k) * d + j];
  }
  part[warp][lane] = s;
  __syncthreads();
  if (warp != 0 || j >= d) return;
  float total = part[0][lane];
#pragma unroll
  for (int i = 1; i < kTotalWarps; ++i) total += part[i][lane];
  (k == 0 ? dw : db)[j] = total;
}

template <int NV_, int W_>
struct RowShape {
  static constexpr int nv = NV_, warps = W_;
};

// f(RowShape<NV, W>()) when 32 W NV V columns hold d.
template <int NV, int W, int V, class F>
bool try_row_shape(int64_t d, F& f) {
  if (d > int64_t(32) * W * NV * V) return false;
  f(RowShape<NV, W>());
  return true;
}

// The forward's register shapes, the first that holds d (fewest warps, then fewest slots); false,
// calling nothing, when d is wider than all.
template <int V, class F>
bool with_row_shape(int64_t d, F&& f) {
  return try_row_shape<1, 1, V>(d, f) || try_row_shape<2, 1, V>(d, f) || try_row_shape<3, 1, V>(d, f) ||
         try_row_shape<4, 1, V>(d, f) || try_row_shape<3, 2, V>(d, f) || try_row_shape<4, 2, V>(d, f) ||
         try_row_shape<3, 4, V>(d, f) || try_row_shape<4, 4, V>(d, f) || try_row_shape<3, 8, V>(d, f) ||
         try_row_shape<4, 8, V>(d, f);
}

// The backward's: a thread also keeps 2 sums an element, so 16-bit rows take more warps before 4
// slots (32 elements, ~160 registers: one block a multiprocessor, which halved the bandwidth).
template <int V, class F>
bool with_backward_row_shape(int64_t d, F&& f) {
  if constexpr (V == 4)
    return with_row_shape<V>(d, f);
  else
    return try_row_shape<1, 1, V>(d, f) || try_row_shape<2, 1, V>(d, f) || try_row_shape<3, 1, V>(d, f) ||
           try_row_shape<2, 2, V>(d, f) || try_row_shape<3, 2, V>(d, f) || try_row_shape<2, 4, V>(d, f) ||
           try_row_shape<3, 4, V>(d, f) || try_row_shape<2, 8, V>(d, f) || try_row_shape<3, 8, V>(d, f) ||
           try_row_shape<4, 8, V>(d, f);
}

// Rows a block of the backward takes.
int64_t block_rows(int64_t rows) {
  const int64_t blocks =
      std::max<int64_t>(1, std::min(kMaxBlocks, (rows + kMinBlockRows - 1) / kMinBlockRows));
  return std::max<int64_t>(1, (rows + blocks - 1) / blocks);
}

}  // namespace

int64_t layer_norm_chunks(int64_t rows, int64_t d) {
  const int64_t per = block_rows(rows);
  return (rows + per - 1) / per;
}

void launch_layer_norm_forward(DType t, const void* x, const float* w, const float* b, void* y, float* stats,
                               int64_t rows, int64_t d, float eps, bool rms, cudaStream_t stream,
                               const void* x2, void* sum) {
  if (rows == 0 || d == 0) return;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = kVec<T>;
    const T* xt = static_cast<const T*>(x);
    const T* x2t = static_cast<const T*>(x2);
    T* st = static_cast<T*>(sum);
    T* yt = static_cast<T*>(y);
    const bool vec = d % V == 0 && aligned16(x) && aligned16(y) && aligned16(w) && (!b || aligned16(b)) &&
                     (!x2 || (aligned16(x2) && aligned16(sum)));
    const bool fit = with_row_shape<V>(d, [&](auto shape) {
      constexpr int NV = decltype(shape)::nv, W = decltype(shape)::warps, R = kBlock / (32 * W);
      const unsigned grid = unsigned((rows + R - 1) / R);
      if (vec)
        layer_norm_forward_rows<T, NV, W, true>
            <<<grid, kBlock, 0, stream>>>(xt, x2t, st, w, b, yt, stats, rows, int(d), eps, rms);
      else
        layer_norm_forward_rows<T, NV, W, false>
            <<<grid, kBlock, 0, stream>>>(xt, x2t, st, w, b, yt, stats, rows, int(d), eps, rms);
    });
    if (fit) return;
    if (x2) {  // the wide rows' kernel reads the sum from memory
      launch_add(t, x, x2, sum, rows * d, stream);
      xt = st;
    }
    layer_norm_forward_wide<T><<<unsigned(rows), kBlock, 0, stream>>>(xt, w, b, yt, stats, d, eps, rms);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_layer_norm_backward(DType t, const void* x, const void* dy, const float* w, const float* stats,
                                void* dx, bool accumulate, float* dw, float* db, float* partials,
                                int64_t rows, int64_t d, bool rms, cudaStream_t stream) {
  if (rows == 0 || d == 0) return;
  const int64_t per = block_rows(rows), blocks = (rows + per - 1) / per;
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    constexpr int V = kVec<T>;
    const T *xt = static_cast<const T*>(x), *dyt = static_cast<const T*>(dy);
    T* dxt = static_cast<T*>(dx);
    const bool vec = d % V == 0 && aligned16(x) && aligned16(dy) && (!dx || aligned16(dx)) && aligned16(w);
    const bool fit = with_backward_row_shape<V>(d, [&](auto shape) {
      constexpr int NV = decltype(shape)::nv, W = decltype(shape)::warps;
      if (vec)
        layer_norm_backward_rows<T, NV, W, true><<<unsigned(blocks), kBlock, 0, stream>>>(
            xt, dyt, w, stats, dxt, accumulate, partials, db != nullptr, rows, int(d), per, rms);
      else
        layer_norm_backward_rows<T, NV, W, false><<<unsigned(blocks), kBlock, 0, stream>>>(
            xt, dyt, w, stats, dxt, accumulate, partials, db != nullptr, rows, int(d), per, rms);
    });
    if (fit) return;
    const size_t sums_bytes = size_t(2 * d) * sizeof(float);
    if (sums_bytes <= kWideSharedBytes)
      layer_norm_backward_wide<T, true><<<unsigned(blocks), kBlock, sums_bytes, stream>>>(
          xt, dyt, w, stats, dxt, accumulate, partials, db != nullptr, rows, d, per, rms);
    else
      layer_norm_backward_wide<T, false><<<unsigned(blocks), kBlock, 0, stream>>>(
          xt, dyt, w, stats, dxt, accumulate, partials, db != nullptr, rows, d, per, rms);
  });
  CUDA_CHECK_LAUNCH();
  const dim3 tiles(unsigned((d + 31) / 32), db ? 2u : 1u);
  layer_norm_param_total<<<tiles, 32 * kTotalWarps, 0, stream>>>(partials, dw, db, blocks, d);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
