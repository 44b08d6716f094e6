// Fused attention (flash_attention.cuh): FlashAttention-2's algorithm in our own kernels, on the
// tensor cores through mma.sync m16n8k16 (bf16 / fp16 in, f32 accumulators) from inline PTX.
//
// Forward: a CTA of 4 warps per (tile of 64 queries, sample and head), a warp per 16 queries.
// The Q tile goes once into registers as mma A fragments; the key tiles of 64 stream through
// shared memory (cp.async, double-buffered K and V), each giving S = Q K^T in registers, an
// online softmax in base 2 (the scale times log2(e) folded in), and O += P V with P turned from
// accumulators into A fragments in registers (two n8 accumulator tiles are one k16 A fragment).
// Causal: only the key tiles up to the diagonal, the diagonal last; the tiles of most work are
// launched first (blockIdx.y counts down the query tiles).
// Backward: a preprocess kernel for delta = rowsum(dO * O); then a CTA per (tile of 64 keys,
// sample and head), a warp per 16 keys, that keeps dK and dV in registers while the query tiles
// stream past (causal: from the diagonal on): S^T = K Q^T, P^T = exp(scale S^T - lse), dV += P^T dO,
// dP^T = V dO^T, dS^T = P^T (dP^T - delta), dK += dS^T Q, and dQ += dS K through dS^T in shared
// memory, added with f32 atomics into the scratch; a last kernel writes dq scale into dqkv's q
// columns. hd 128 takes query tiles of 32 there, so that the registers hold dK and dV.
// Masks: a key past L or with id 0 and (causal) a key after the query get weight exactly 0; a
// query with no key left has lse = +inf, so its weights are exp2(-inf) = 0 in both passes.
// Dropout (FlashDropout, kernels instantiated with DROP): the forward sums the weights before
// dropout (lse, the normalization) and multiplies P by the mask before P V; backward takes
// dV += (P Z)^T dO and dS = P (Z dP' - delta) with dP' = dO V^T and delta = rowsum(dO * O) (O is the
// dropped output, so delta = sum_j P Z dP' as the softmax's backward needs), the mask Z recomputed.
// Shared-memory rows are padded by 8 elements (16 bytes): the 8 rows an ldmatrix reads then start
// in 8 different groups of 4 banks.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/flash_attention.cuh"
#include "kernels/cuda/launch.cuh"
#include "lib/core/counter_rng.h"
#include "lib/core/dropout_formula.h"

namespace trainer::cuda {
namespace {

constexpr int kFlashWarps = 4, kFlashThreads = 32 * kFlashWarps;
constexpr int kBlockK = 64;  // keys a tile (both passes); queries a tile of the forward
constexpr int kPad = 8;      // elements after each shared-memory row
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

// ---- PTX wrappers ----

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return uint32_t(__cvta_generic_to_shared(p));
}

// 16 bytes from global to shared memory, asynchronously; !valid: 16 zero bytes (src not read).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 16 : 0));
#else
  *static_cast<uint4*>(dst) = valid ? *static_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
// Waits until at most `pending` of this thread's committed groups are in flight.
template <int pending>
__device__ __forceinline__ void cp_async_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(pending));
#endif
}

// Four 8x8 matrices of 16-bit elements; lane l gives the address of row l % 8 of matrix l / 8
// and receives elements (l / 4, 2 (l % 4) .. +1) of each (.trans: (2 (l % 4) .. +1, l / 4)).
// Shared-memory addresses as 32-bit integers (shared_address()): a lane's base plus a constant,
// which ptxas folds into the instruction (generic pointers took a register per address).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// The lane's row and column offsets for ldmatrix_x4 of a 16x16 block at (r, c):
// rows_first: the matrices at (r, c), (r + 8, c), (r, c + 8), (r + 8, c + 8) (an A fragment
//   a0..a3 non-transposed; two n8 B fragments {b0, b1} x 2 transposed);
// cols_first: at (r, c), (r, c + 8), (r + 8, c), (r + 8, c + 8) (two n8 B fragments
//   non-transposed; an A fragment transposed).
struct LaneOffset {
  int row, col;
};
__device__ __forceinline__ LaneOffset rows_first(int lane) {
  return {(lane & 7) + (lane & 8), (lane & 16) >> 1};
}
__device__ __forceinline__ LaneOffset cols_first(int lane) {
  return {(lane & 7) + ((lane & 16) >> 1), lane & 8};
}

// c (16x8, f32) += a (16x16) b (16x8). Lane l = 4 g + t holds: a0 (g, 2t..+1), a1 (g + 8, 2t..),
// a2 (g, 2t + 8..), a3 (g + 8, 2t + 8..); b0 (2t..+1, g), b1 (2t + 8.., g); c0, c1 (g, 2t..+1),
// c2, c3 (g + 8, 2t..+1). Two 16-bit elements a register, the lower index in the low half.
template <class T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  __trap();  // never launched: flash_attention_supported() asks for compute capability 8.0
#endif
}

// Two floats as two 16-bit elements of one register, lo in the low half.
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  uint32_t u;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    memcpy(&u, &v, 4);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    memcpy(&u, &v, 4);
  }
  return u;
}

// The A fragment of rows (g, g + 8) x keys 16 k .. 16 k + 15 from accumulators of 8 keys each:
// tile 2k gives columns 2t..+1 (a0, a1), tile 2k + 1 columns 2t + 8.. (a2, a3).
template <class T>
__device__ __forceinline__ void accumulators_to_a(uint32_t (&a)[4], const float (&lo)[4],
                                                  const float (&hi)[4]) {
  a[0] = pack2<T>(lo[0], lo[1]);
  a[1] = pack2<T>(lo[2], lo[3]);
  a[2] = pack2<T>(hi[0], hi[1]);
  a[3] = pack2<T>(hi[2], hi[3]);
}

// 2^x (ex2.approx: 2^-inf = 0).
__device__ __forceinline__ float exp2_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ void atomic_add_pair(float* p, float a, float b) {
#if __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(p), make_float2(a, b));  // one 8-byte reduction
#else
  atomicAdd(p, a);
  atomicAdd(p + 1, b);
#endif
}

// Rows [row0, row0 + R) of a row-major matrix (`ld` elements between rows), HD columns from src,
// into dst [R][HD + kPad] with cp.async (the caller commits); rows at or past len are zero.
template <int R, int HD, class T>
__device__ __forceinline__ void load_rows(T* dst, const T* src, int64_t ld, int row0, int len) {
  constexpr int kChunks = HD / 8;  // 16-byte pieces a row
  static_assert(R * kChunks % kFlashThreads == 0, "every thread moves as many pieces");
#pragma unroll
  for (int i = 0; i < R * kChunks / kFlashThreads; ++i) {
    const int c = i * kFlashThreads + int(threadIdx.x), r = c / kChunks, col = c % kChunks * 8;
    const bool valid = row0 + r < len;
    cp_async_16(dst + r * (HD + kPad) + col, valid ? src + int64_t(row0 + r) * ld + col : src, valid);
  }
}

// A warp's 16 rows of a tile staged in shared memory (stride HD + kPad) to global rows
// row0 + (0..15) (`ld` apart), 16 bytes a lane at a time; rows at or past len are skipped.
template <int HD, class T>
__device__ __forceinline__ void store_warp_rows(T* dst, int64_t ld, const T* stage, int row0, int len,
                                                int lane) {
  constexpr int kChunks = HD / 8;
#pragma unroll
  for (int i = 0; i < 16 * kChunks / 32; ++i) {
    const int c = i * 32 + lane, r = c / kChunks, col = c % kChunks * 8;
    if (row0 + r < len)
      *reinterpret_cast<uint4*>(dst + int64_t(row0 + r) * ld + col) =
          *reinterpret_cast<const uint4*>(stage + r * (HD + kPad) + col);
  }
}

// The dropout mask of the weight of (bh, query q, key k) this launch: 0 or 1 / (1 - rate), from
// the counter ((b H + h) L + q) L + k, in both passes (FlashDropout). DROP false: never read.
struct DropoutMask {
  uint64_t seed = 0, stream = 0;
  float rate = 0.f, keep = 1.f;
  DropoutMask() = default;
  __device__ explicit DropoutMask(const FlashDropout& d)
      : seed(d.scalars->seed),
        stream(dropout_stream(d.scalars->step, d.layer)),
        rate(d.rate),
        keep(dropout_keep_scale(d.rate)) {}
  __device__ float at(int bh, int len, int64_t q, int64_t k) const {
    return dropout_mask(seed, stream, uint64_t((int64_t(bh) * len + q) * len + k), rate, keep);
  }
};

template <class T>
__device__ __forceinline__ bool key_allowed(const T* ids, int key, int len) {
  return key < len && (ids == nullptr || to_f32(ids[key]) != 0.f);
}

// ---- forward ----

template <int HD>
struct ForwardSmem {
  static constexpr int kStride = HD + kPad;
  static constexpr int kTile = kBlockK * kStride;  // elements of a tile of 64 rows
  // Q, K[2], V[2] (16-bit), then each key tile's additive mask [2][64] (f32: 0 or -inf).
  static constexpr size_t kBytes = 5 * size_t(kTile) * 2 + 2 * kBlockK * sizeof(float);
};

// grid (B H, query tiles), blockIdx.y counting down the tiles when causal (most keys first).
template <class T, int HD, bool DROP>
__global__ void __launch_bounds__(kFlashThreads, HD == 128  ? 2
                                                 : HD == 64 ? 3
                                                            : 4)
    flash_forward_kernel(const T* __restrict__ qkv, T* __restrict__ o, float* __restrict__ lse, int len,
                         int heads, bool causal, const T* __restrict__ ids, float scale_log2,
                         FlashDropout drop) {
  using Smem = ForwardSmem<HD>;
  constexpr int S = Smem::kStride, kDimChunks = HD / 16, kOutTiles = HD / 8, kKeyTiles = kBlockK / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  T* sq = reinterpret_cast<T*>(smem);                             // (64, S), later the output's staging
  T* sk = sq + Smem::kTile;                                       // (2, 64, S)
  T* sv = sk + 2 * Smem::kTile;                                   // (2, 64, S)
  float* smask = reinterpret_cast<float*>(sv + 2 * Smem::kTile);  // (2, 64)

  const int qt = causal ? int(gridDim.y - 1 - blockIdx.y) : int(blockIdx.y);
  const int bh = int(blockIdx.x), b = bh / heads, h = bh % heads;
  const int64_t D = int64_t(heads) * HD, ld = 3 * D;
  const T* q_rows = qkv + int64_t(b) * len * ld + int64_t(h) * HD;  // (L, 3D) from this head's q
  const T* k_rows = q_rows + D;
  const T* v_rows = q_rows + 2 * D;
  const T* keys = ids ? ids + int64_t(b) * len : nullptr;
  const int q0 = qt * kBlockK, ktiles = causal ? qt + 1 : (len + kBlockK - 1) / kBlockK;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const DropoutMask drop_mask = DROP ? DropoutMask(drop) : DropoutMask();

  const auto load_keys = [&](int j, int buf) {
    load_rows<kBlockK, HD>(sk + buf * Smem::kTile, k_rows, ld, j * kBlockK, len);
    load_rows<kBlockK, HD>(sv + buf * Smem::kTile, v_rows, ld, j * kBlockK, len);
    if (threadIdx.x < kBlockK)
      smask[buf * kBlockK + threadIdx.x] =
          key_allowed(keys, j * kBlockK + int(threadIdx.x), len) ? 0.f : -INFINITY;
    cp_async_commit();
  };
  load_rows<kBlockK, HD>(sq, q_rows, ld, q0, len);
  load_keys(0, 0);  // one group with Q

  uint32_t qf[kDimChunks][4];           // the warp's 16 queries as A fragments
  float acc[kOutTiles][4] = {};         // O, unnormalized: rows (g, g + 8) x columns 8 n + 2t..
  float m[2] = {-INFINITY, -INFINITY};  // running max of each row's scores (base 2)
  float l[2] = {0.f, 0.f};              // this lane's share of each row's sum of weights
  const LaneOffset ra = rows_first(lane), ca = cols_first(lane);
  const int row = q0 + warp * 16 + g;  // the lane's rows: row and row + 8
  constexpr uint32_t kTileBytes = Smem::kTile * 2;
  const uint32_t q_lane = shared_address(sq) + ((warp * 16 + ra.row) * S + ra.col) * 2;
  const uint32_t k_lane = shared_address(sk) + (ca.row * S + ca.col) * 2;
  const uint32_t v_lane = shared_address(sv) + (ra.row * S + ra.col) * 2;

  for (int j = 0; j < ktiles; ++j) {
    const int buf = j & 1;
    if (j + 1 < ktiles) {
      load_keys(j + 1, buf ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if (j == 0) {
#pragma unroll
      for (int kc = 0; kc < kDimChunks; ++kc) ldmatrix_x4(qf[kc], q_lane + kc * 16 * 2);
    }
    // S = Q K^T: 16 queries x 64 keys.
    float s[kKeyTiles][4] = {};
    const uint32_t kt = k_lane + buf * kTileBytes;
#pragma unroll
    for (int np = 0; np < kKeyTiles / 2; ++np) {
#pragma unroll
      for (int kc = 0; kc < kDimChunks; ++kc) {
        uint32_t bk[4];
        ldmatrix_x4(bk, kt + (np * 16 * S + kc * 16) * 2);
        mma_16816<T>(s[2 * np], qf[kc], bk[0], bk[1]);
        mma_16816<T>(s[2 * np + 1], qf[kc], bk[2], bk[3]);
      }
    }
    // Base-2 scores, masked to -inf.
    const int k0 = j * kBlockK;
    const bool diagonal = causal && j == ktiles - 1, ragged = keys != nullptr || k0 + kBlockK > len;
    const float* mask = smask + buf * kBlockK;
#pragma unroll
    for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = nt * 8 + 2 * t + (e & 1);
        float v = s[nt][e] * scale_log2;
        if (ragged) v += mask[col];
        if (diagonal && k0 + col > row + (e >> 1) * 8) v = -INFINITY;
        s[nt][e] = v;
      }
    }
    // Online softmax: the new max of each row (over the quad of lanes that share it), the old
    // sums and O rescaled to it, the weights exp2(s - max). base 0 where a row has no key yet.
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) mx[e >> 1] = fmaxf(mx[e >> 1], s[nt][e]);
    }
    float base[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      base[r] = mx[r] == -INFINITY ? 0.f : mx[r];
      const float alpha = exp2_fast(m[r] - base[r]);  // 0 while m is -inf
      m[r] = mx[r];
      l[r] *= alpha;
#pragma unroll
      for (int nt = 0; nt < kOutTiles; ++nt) {
        acc[nt][2 * r] *= alpha;
        acc[nt][2 * r + 1] *= alpha;
      }
    }
#pragma unroll
    for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[nt][e] = exp2_fast(s[nt][e] - base[e >> 1]);
        l[e >> 1] += s[nt][e];  // the weights before dropout
        if constexpr (DROP) {
          s[nt][e] *= drop_mask.at(bh, len, row + (e >> 1) * 8, k0 + nt * 8 + 2 * t + (e & 1));
        }
      }
    }
    // O += P V: P from the accumulators, 16 keys at a time.
    const uint32_t vt = v_lane + buf * kTileBytes;
#pragma unroll
    for (int kc = 0; kc < kBlockK / 16; ++kc) {
      uint32_t a[4];
      accumulators_to_a<T>(a, s[2 * kc], s[2 * kc + 1]);
#pragma unroll
      for (int np = 0; np < HD / 16; ++np) {
        uint32_t bv[4];
        ldmatrix_x4_trans(bv, vt + (kc * 16 * S + np * 16) * 2);
        mma_16816<T>(acc[2 * np], a, bv[0], bv[1]);
        mma_16816<T>(acc[2 * np + 1], a, bv[2], bv[3]);
      }
    }
    __syncthreads();  // the next iteration's loads go into this tile's buffers
  }

  // O / rowsum (0 for a row with no key), staged in the warp's rows of sq; lse in natural units.
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
    inv[r] = l[r] > 0.f ? 1.f / l[r] : 0.f;
    const int q = row + 8 * r;
    if (t == 0 && q < len) lse[int64_t(bh) * len + q] = l[r] > 0.f ? (m[r] + __log2f(l[r])) * kLn2 : INFINITY;
  }
  T* stage = sq + warp * 16 * S;
#pragma unroll
  for (int nt = 0; nt < kOutTiles; ++nt) {
    const int col = nt * 8 + 2 * t;
    *reinterpret_cast<uint32_t*>(stage + g * S + col) = pack2<T>(acc[nt][0] * inv[0], acc[nt][1] * inv[0]);
    *reinterpret_cast<uint32_t*>(stage + (g + 8) * S + col) =
        pack2<T>(acc[nt][2] * inv[1], acc[nt][3] * inv[1]);
  }
  __syncwarp();
  store_warp_rows<HD>(o + int64_t(b) * len * D + int64_t(h) * HD, D, stage, q0 + warp * 16, len, lane);
}

// ---- backward ----

// hd 128 takes query tiles of 32: dK and dV (16 x 128 f32 each) stay in registers beside S^T and dP^T.
template <int HD>
struct BackwardShape {
  static constexpr int kBlockQ = HD == 128 ? 32 : 64;
  static constexpr int kStride = HD + kPad, kStrideDs = kBlockQ + kPad;
  static constexpr int kKeyTile = kBlockK * kStride, kQueryTile = kBlockQ * kStride;
  // K, V, Q[2], dO[2], dS^T (64, kBlockQ + kPad) (16-bit), then lse (base 2) [2][kBlockQ] and
  // delta [2][kBlockQ] (f32).
  static constexpr size_t kBytes =
      (2 * size_t(kKeyTile) + 4 * size_t(kQueryTile) + size_t(kBlockK) * kStrideDs) * 2 +
      4 * kBlockQ * sizeof(float);
  // dQ's tile (kBlockQ x HD) among the 4 warps: 16 rows each, the columns split where kBlockQ < 64.
  static constexpr int kRowGroups = kBlockQ / 16, kDqCols = HD / (kFlashWarps / kRowGroups);
};

// delta[b, h, i] = sum_d dO[b, i, h hd + d] O[b, i, h hd + d]: HD / 8 lanes a (row, head), 16 bytes
// each.
template <class T, int HD>
__global__ void flash_delta_kernel(const T* __restrict__ o, const T* __restrict__ dout,
                                   float* __restrict__ delta, int64_t rows, int len, int heads) {
  constexpr int kLanes = HD / 8;
  const int64_t group = global_index() / kLanes, D = int64_t(heads) * HD;
  const int part = int(threadIdx.x) % kLanes;
  const bool valid = group < rows * heads;
  const int64_t r = valid ? group / heads : 0, h = valid ? group % heads : 0;
  float sum = 0.f;
  if (valid) {
    const int64_t at = r * D + h * HD + part * 8;
    const uint4 ov = *reinterpret_cast<const uint4*>(o + at), dv = *reinterpret_cast<const uint4*>(dout + at);
    const T* oe = reinterpret_cast<const T*>(&ov);
    const T* de = reinterpret_cast<const T*>(&dv);
#pragma unroll
    for (int k = 0; k < 8; ++k) sum += to_f32(oe[k]) * to_f32(de[k]);
  }
#pragma unroll
  for (int off = kLanes / 2; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (valid && part == 0) delta[(r / len * heads + h) * len + r % len] = sum;
}

// grid (B H, key tiles): the key tile j has the most query tiles (causal) at j = 0, launched first.
template <class T, int HD, bool DROP>
__global__ void __launch_bounds__(kFlashThreads, 2)
    flash_backward_kernel(const T* __restrict__ qkv, const T* __restrict__ dout,
                          const float* __restrict__ lse, const float* __restrict__ delta,
                          float* __restrict__ dq_sum, T* __restrict__ dqkv, int len, int heads, bool causal,
                          const T* __restrict__ ids, float scale, float scale_log2, FlashDropout drop) {
  using Shape = BackwardShape<HD>;
  constexpr int S = Shape::kStride, SD = Shape::kStrideDs, BQ = Shape::kBlockQ;
  constexpr int kDimChunks = HD / 16, kOutTiles = HD / 8, kQueryTiles = BQ / 8;
  extern __shared__ __align__(16) unsigned char smem[];
  T* sk = reinterpret_cast<T*>(smem);                          // (64, S)
  T* sv = sk + Shape::kKeyTile;                                // (64, S)
  T* sq = sv + Shape::kKeyTile;                                // (2, BQ, S), later dK's staging
  T* sdo = sq + 2 * Shape::kQueryTile;                         // (2, BQ, S), later dV's staging
  T* sds = sdo + 2 * Shape::kQueryTile;                        // dS^T (64, SD)
  float* slse = reinterpret_cast<float*>(sds + kBlockK * SD);  // (2, BQ), base 2, +inf: no weights
  float* sdelta = slse + 2 * BQ;                               // (2, BQ)

  const int kt = int(blockIdx.y), bh = int(blockIdx.x), b = bh / heads, h = bh % heads;
  const int64_t D = int64_t(heads) * HD, ld = 3 * D;
  const T* q_rows = qkv + int64_t(b) * len * ld + int64_t(h) * HD;   // (L, 3D) from this head's q
  const T* do_rows = dout + int64_t(b) * len * D + int64_t(h) * HD;  // (L, D)
  const int k0 = kt * kBlockK, qtiles = (len + BQ - 1) / BQ, first = causal ? k0 / BQ : 0;
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const DropoutMask drop_mask = DROP ? DropoutMask(drop) : DropoutMask();

  const auto load_queries = [&](int i, int buf) {
    load_rows<BQ, HD>(sq + buf * Shape::kQueryTile, q_rows, ld, i * BQ, len);
    load_rows<BQ, HD>(sdo + buf * Shape::kQueryTile, do_rows, D, i * BQ, len);
    if (threadIdx.x < BQ) {
      const int q = i * BQ + int(threadIdx.x);
      const int64_t at = int64_t(bh) * len + q;
      slse[buf * BQ + threadIdx.x] = q < len ? lse[at] * kLog2e : INFINITY;
      sdelta[buf * BQ + threadIdx.x] = q < len ? delta[at] : 0.f;
    }
    cp_async_commit();
  };
  load_rows<kBlockK, HD>(sk, q_rows + D, ld, k0, len);
  load_rows<kBlockK, HD>(sv, q_rows + 2 * D, ld, k0, len);
  load_queries(first, 0);  // one group with K and V

  const T* keys = ids ? ids + int64_t(b) * len : nullptr;
  const int key = k0 + warp * 16 + g;  // the lane's keys: key and key + 8
  const bool key_ok[2] = {key_allowed(keys, key, len), key_allowed(keys, key + 8, len)};
  float dk[kOutTiles][4] = {}, dv[kOutTiles][4] = {};  // rows (g, g + 8) of the warp's keys
  // The lanes' ldmatrix addresses: the warp's 16 keys of K and V (A fragments), Q and dO
  // (B fragments, non-transposed and transposed), dS^T and K for dQ.
  const LaneOffset ra = rows_first(lane), ca = cols_first(lane);
  constexpr uint32_t kQueryTileBytes = Shape::kQueryTile * 2;
  const int rq = warp % Shape::kRowGroups * 16, c0 = warp / Shape::kRowGroups * Shape::kDqCols;
  const uint32_t k_a = shared_address(sk) + ((warp * 16 + ra.row) * S + ra.col) * 2;
  const uint32_t v_a = shared_address(sv) + ((warp * 16 + ra.row) * S + ra.col) * 2;
  const uint32_t q_b = shared_address(sq) + (ca.row * S + ca.col) * 2;
  const uint32_t do_b = shared_address(sdo) + (ca.row * S + ca.col) * 2;
  const uint32_t q_bt = shared_address(sq) + (ra.row * S + ra.col) * 2;
  const uint32_t do_bt = shared_address(sdo) + (ra.row * S + ra.col) * 2;
  const uint32_t ds_at = shared_address(sds) + (ca.row * SD + rq + ca.col) * 2;
  const uint32_t k_bt = shared_address(sk) + (ra.row * S + c0 + ra.col) * 2;

  for (int i = first; i < qtiles; ++i) {
    const int buf = (i - first) & 1;
    if (i + 1 < qtiles) {
      load_queries(i + 1, buf ^ 1);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const uint32_t tile = buf * kQueryTileBytes;
    const float* lse2 = slse + buf * BQ;
    const float* dl = sdelta + buf * BQ;
    const int i0 = i * BQ;

    // S^T = K Q^T and dP^T = V dO^T: 16 keys x BQ queries.
    float p[kQueryTiles][4] = {}, dp[kQueryTiles][4] = {};
#pragma unroll
    for (int kc = 0; kc < kDimChunks; ++kc) {
      uint32_t ak[4], av[4];
      ldmatrix_x4(ak, k_a + kc * 16 * 2);
      ldmatrix_x4(av, v_a + kc * 16 * 2);
#pragma unroll
      for (int np = 0; np < kQueryTiles / 2; ++np) {
        uint32_t bq[4], bo[4];
        ldmatrix_x4(bq, q_b + tile + (np * 16 * S + kc * 16) * 2);
        mma_16816<T>(p[2 * np], ak, bq[0], bq[1]);
        mma_16816<T>(p[2 * np + 1], ak, bq[2], bq[3]);
        ldmatrix_x4(bo, do_b + tile + (np * 16 * S + kc * 16) * 2);
        mma_16816<T>(dp[2 * np], av, bo[0], bo[1]);
        mma_16816<T>(dp[2 * np + 1], av, bo[2], bo[3]);
      }
    }
    // P^T = exp2(scale log2(e) S^T - lse2), exactly 0 where masked; dS^T = P^T (dP^T - delta).
    const bool diagonal = causal && i0 < k0 + kBlockK - 1;  // some query before some key
#pragma unroll
    for (int nt = 0; nt < kQueryTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = nt * 8 + 2 * t + (e & 1);
        float w = exp2_fast(p[nt][e] * scale_log2 - lse2[col]);
        if (!key_ok[e >> 1] || (diagonal && i0 + col < key + (e >> 1) * 8)) w = 0.f;
        if constexpr (DROP) {  // P Z for dV, and dP = Z dP' into dS
          const float z = drop_mask.at(bh, len, i0 + col, key + (e >> 1) * 8);
          p[nt][e] = w * z;
          dp[nt][e] = w * (dp[nt][e] * z - dl[col]);
        } else {
          p[nt][e] = w;
          dp[nt][e] = w * (dp[nt][e] - dl[col]);
        }
      }
    }
    // dV += P^T dO, dK += dS^T Q: A fragments from the accumulators, 16 queries at a time.
#pragma unroll
    for (int kc = 0; kc < BQ / 16; ++kc) {
      uint32_t ap[4], as[4];
      accumulators_to_a<T>(ap, p[2 * kc], p[2 * kc + 1]);
      accumulators_to_a<T>(as, dp[2 * kc], dp[2 * kc + 1]);
#pragma unroll
      for (int np = 0; np < HD / 16; ++np) {
        uint32_t bo[4], bq[4];
        ldmatrix_x4_trans(bo, do_bt + tile + (kc * 16 * S + np * 16) * 2);
        mma_16816<T>(dv[2 * np], ap, bo[0], bo[1]);
        mma_16816<T>(dv[2 * np + 1], ap, bo[2], bo[3]);
        ldmatrix_x4_trans(bq, q_bt + tile + (kc * 16 * S + np * 16) * 2);
        mma_16816<T>(dk[2 * np], as, bq[0], bq[1]);
        mma_16816<T>(dk[2 * np + 1], as, bq[2], bq[3]);
      }
    }
    // dS^T to shared memory: rows = keys, columns = queries.
#pragma unroll
    for (int nt = 0; nt < kQueryTiles; ++nt) {
      const int col = nt * 8 + 2 * t, r = warp * 16 + g;
      *reinterpret_cast<uint32_t*>(sds + r * SD + col) = pack2<T>(dp[nt][0], dp[nt][1]);
      *reinterpret_cast<uint32_t*>(sds + (r + 8) * SD + col) = pack2<T>(dp[nt][2], dp[nt][3]);
    }
    __syncthreads();
    // dQ (BQ x HD) += dS K over the tile's 64 keys: the warp's 16 queries x kDqCols columns, added
    // to the f32 sums (other key tiles add theirs).
    {
      constexpr int kCols = Shape::kDqCols;
      float dq[kCols / 8][4] = {};
#pragma unroll
      for (int kc = 0; kc < kBlockK / 16; ++kc) {
        uint32_t as[4];
        ldmatrix_x4_trans(as, ds_at + kc * 16 * SD * 2);
#pragma unroll
        for (int np = 0; np < kCols / 16; ++np) {
          uint32_t bk[4];
          ldmatrix_x4_trans(bk, k_bt + (kc * 16 * S + np * 16) * 2);
          mma_16816<T>(dq[2 * np], as, bk[0], bk[1]);
          mma_16816<T>(dq[2 * np + 1], as, bk[2], bk[3]);
        }
      }
      const int q = i0 + rq + g;
      float* out = dq_sum + (int64_t(b) * len + q) * D + int64_t(h) * HD + c0 + 2 * t;
#pragma unroll
      for (int nt = 0; nt < kCols / 8; ++nt) {
        if (q < len) atomic_add_pair(out + nt * 8, dq[nt][0], dq[nt][1]);
        if (q + 8 < len) atomic_add_pair(out + 8 * D + nt * 8, dq[nt][2], dq[nt][3]);
      }
    }
    __syncthreads();  // the next iteration's loads go into this tile's buffers, and dS^T is rewritten
  }

  // dK (times scale: S = scale q.k) and dV into dqkv's k and v columns, staged in shared memory.
  T* stage_k = sq + warp * 16 * S;
  T* stage_v = sdo + warp * 16 * S;
#pragma unroll
  for (int nt = 0; nt < kOutTiles; ++nt) {
    const int col = nt * 8 + 2 * t;
    *reinterpret_cast<uint32_t*>(stage_k + g * S + col) = pack2<T>(dk[nt][0] * scale, dk[nt][1] * scale);
    *reinterpret_cast<uint32_t*>(stage_k + (g + 8) * S + col) =
        pack2<T>(dk[nt][2] * scale, dk[nt][3] * scale);
    *reinterpret_cast<uint32_t*>(stage_v + g * S + col) = pack2<T>(dv[nt][0], dv[nt][1]);
    *reinterpret_cast<uint32_t*>(stage_v + (g + 8) * S + col) = pack2<T>(dv[nt][2], dv[nt][3]);
  }
  __syncwarp();
  T* dk_rows = dqkv + int64_t(b) * len * ld + D + int64_t(h) * HD;
  store_warp_rows<HD>(dk_rows, ld, stage_k, k0 + warp * 16, len, lane);
  store_warp_rows<HD>(dk_rows + D, ld, stage_v, k0 + warp * 16, len, lane);
}

// dqkv's q columns = dq sums * scale, two elements a thread.
template <class T>
__global__ void flash_dq_kernel(const float* __restrict__ dq_sum, T* __restrict__ dqkv, int64_t pairs,
                                int64_t d, float scale) {
  const int64_t half = d / 2;
  for (int64_t i = global_index(); i < pairs; i += grid_stride()) {
    const float2 v = reinterpret_cast<const float2*>(dq_sum)[i];
    const int64_t row = i / half, c = i % half * 2;
    *reinterpret_cast<uint32_t*>(dqkv + row * 3 * d + c) = pack2<T>(v.x * scale, v.y * scale);
  }
}

constexpr size_t kScratchAlign = 256;
size_t delta_bytes(int64_t batch, int64_t len, int64_t heads) {
  return (size_t(batch * heads * len) * sizeof(float) + kScratchAlign - 1) / kScratchAlign * kScratchAlign;
}

// f(T(), std::integral_constant<int, HD>()) for the supported dtype and head dim.
template <class F>
void with_flash_shape(DType t, int64_t head_dim, F&& f) {
  if (!(t == DType::bf16 || t == DType::f16) || !(head_dim == 32 || head_dim == 64 || head_dim == 128))
    throw InternalError(std::string("fused attention called for dtype ") + dtype_name(t) + ", head dim " +
                        std::to_string(head_dim) + " (flash_attention_supported() says no)");
  const auto by_dim = [&](auto tag) {
    if (head_dim == 32)
      f(tag, std::integral_constant<int, 32>());
    else if (head_dim == 64)
      f(tag, std::integral_constant<int, 64>());
    else
      f(tag, std::integral_constant<int, 128>());
  };
  if (t == DType::bf16)
    by_dim(__nv_bfloat16());
  else
    by_dim(__half());
}

void check_aligned(std::initializer_list<const void*> pointers) {
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      throw InternalError("fused attention needs 16-byte aligned tensors");
}

}  // namespace

bool flash_attention_supported(DType t, int64_t head_dim) {
  if (!(t == DType::bf16 || t == DType::f16) || !(head_dim == 32 || head_dim == 64 || head_dim == 128))
    return false;
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return major >= 8;
}

void launch_flash_attention_forward(DType t, const void* qkv, void* o, float* lse, int64_t batch, int64_t len,
                                    int64_t heads, int64_t head_dim, bool causal, const void* ids,
                                    float scale, cudaStream_t stream, const FlashDropout& dropout) {
  if (batch <= 0 || len <= 0 || heads <= 0) return;
  check_aligned({qkv, o});
  with_flash_shape(t, head_dim, [&](auto tag, auto dim) {
    using T = decltype(tag);
    constexpr int HD = decltype(dim)::value;
    const auto kernel =
        dropout.rate > 0.f ? flash_forward_kernel<T, HD, true> : flash_forward_kernel<T, HD, false>;
    const size_t smem = ForwardSmem<HD>::kBytes;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    const dim3 grid(unsigned(batch * heads), unsigned((len + kBlockK - 1) / kBlockK));
    kernel<<<grid, kFlashThreads, smem, stream>>>(static_cast<const T*>(qkv), static_cast<T*>(o), lse,
                                                  int(len), int(heads), causal, static_cast<const T*>(ids),
                                                  scale * kLog2e, dropout);
    CUDA_CHECK_LAUNCH();
  });
}

size_t flash_attention_backward_scratch_bytes(int64_t batch, int64_t len, int64_t heads, int64_t head_dim) {
  return delta_bytes(batch, len, heads) + size_t(batch * len * heads * head_dim) * sizeof(float);
}

void launch_flash_attention_backward(DType t, const void* qkv, const void* o, const void* dout,
                                     const float* lse, void* dqkv, void* scratch, int64_t batch, int64_t len,
                                     int64_t heads, int64_t head_dim, bool causal, const void* ids,
                                     float scale, cudaStream_t stream, const FlashDropout& dropout) {
  if (batch <= 0 || len <= 0 || heads <= 0) return;
  check_aligned({qkv, o, dout, dqkv, scratch});
  float* delta = static_cast<float*>(scratch);
  float* dq_sum = reinterpret_cast<float*>(static_cast<char*>(scratch) + delta_bytes(batch, len, heads));
  const int64_t rows = batch * len, d = heads * head_dim;
  CUDA_CHECK(cudaMemsetAsync(dq_sum, 0, size_t(rows * d) * sizeof(float), stream));
  with_flash_shape(t, head_dim, [&](auto tag, auto dim) {
    using T = decltype(tag);
    constexpr int HD = decltype(dim)::value;
    const int64_t lanes = rows * heads * (HD / 8);
    flash_delta_kernel<T, HD><<<unsigned((lanes + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        static_cast<const T*>(o), static_cast<const T*>(dout), delta, rows, int(len), int(heads));
    CUDA_CHECK_LAUNCH();
    const auto kernel =
        dropout.rate > 0.f ? flash_backward_kernel<T, HD, true> : flash_backward_kernel<T, HD, false>;
    const size_t smem = BackwardShape<HD>::kBytes;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    const dim3 grid(unsigned(batch * heads), unsigned((len + kBlockK - 1) / kBlockK));
    kernel<<<grid, kFlashThreads, smem, stream>>>(
        static_cast<const T*>(qkv), static_cast<const T*>(dout), lse, delta, dq_sum, static_cast<T*>(dqkv),
        int(len), int(heads), causal, static_cast<const T*>(ids), scale, scale * kLog2e, dropout);
    CUDA_CHECK_LAUNCH();
    flash_dq_kernel<T><<<grid_for(rows * d / 2), kThreads, 0, stream>>>(dq_sum, static_cast<T*>(dqkv),
                                                                        rows * d / 2, d, scale);
    CUDA_CHECK_LAUNCH();
  });
}

}  // namespace trainer::cuda
