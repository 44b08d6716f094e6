// Layout conversions of channels_last.h: tiled transposes (transpose_tiles_kernel), else one
// thread per element of the destination, reading the source at the transposed index (they run
// only at the edges of channels-last chains and on filters).
#include <algorithm>

#include "kernels/cuda/channels_last.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/launch.cuh"

namespace trainer::cuda {
namespace {

// Index i walks dst; its (sample, channel, position) is read from src in src's layout, or zero.
// Index arithmetic in I: 32 bits where the tensors allow (launch.cuh: fits_int32_loop; three
// 64-bit divisions per element made converting vgg11_bn_cifar's 512 -> 512 3x3 filters, 14 MB,
// instruction-bound at 13.5 us on an H100).
template <class D, class S, class I>
__global__ void relayout_kernel(const S* src, bool src_nhwc, I src_c, D* dst, bool dst_nhwc, I dst_c, I b,
                                I positions) {
  const I n = b * dst_c * positions, stride = I(gridDim.x) * I(blockDim.x);
  // dst's index is ((sample, outer), inner): inner the channel in NHWC, the position in NCHW.
  const I inner = dst_nhwc ? dst_c : positions, outer = dst_nhwc ? positions : dst_c;
  for (I i = I(blockIdx.x) * I(blockDim.x) + I(threadIdx.x); i < n; i += stride) {
    const I q = i / inner, sample = q / outer;
    const I in = i - q * inner, out = q - sample * outer;
    const I c = dst_nhwc ? in : out, pos = dst_nhwc ? out : in;
    float v = 0.f;
    if (c < src_c)
      v = to_f32(
          src[src_nhwc ? (sample * positions + pos) * src_c + c : (sample * src_c + c) * positions + pos]);
    dst[i] = from_f32<D>(v);
  }
}

// A transpose between layouts through shared-memory tiles, so that both the reads and the writes
// are coalesced (relayout_kernel reads one of the two at a stride of C or P elements: 0.6 TB/s on
// an H200 for resnet18's 56x56 maps). Per sample, src is a row-major (rows_s, cols_s) matrix,
// (C, P) in NCHW or (P, C) in NHWC, and dst the (rows_d, cols_d) matrix with dst(i, j) = src(j, i)
// where j < rows_s and i < cols_s, else 0 (padding channels). A block moves a kTile x kTile tile:
// kTile x kRows threads, each kTile / kRows elements, read along src's rows and written along
// dst's. blockIdx.z (and then a loop) walks the samples, blockIdx.y (and a loop) the tile rows.
constexpr int kTile = 32, kRows = 8;

template <class D, class S>
__global__ void transpose_tiles_kernel(const S* src, int32_t rows_s, int32_t cols_s, D* dst, int32_t rows_d,
                                       int32_t cols_d, int64_t b) {
  __shared__ float tile[kTile][kTile + 1];
  const int32_t tiles_y = (rows_d + kTile - 1) / kTile;
  const int32_t j0 = int32_t(blockIdx.x) * kTile;  // dst columns = src rows
  for (int64_t sample = blockIdx.z; sample < b; sample += gridDim.z) {
    const S* s = src + sample * int64_t(rows_s) * cols_s;
    D* d = dst + sample * int64_t(rows_d) * cols_d;
    for (int32_t ty = int32_t(blockIdx.y); ty < tiles_y; ty += int32_t(gridDim.y)) {
      const int32_t i0 = ty * kTile;  // dst rows = src columns
      __syncthreads();                // the tile's previous use is read out
      for (int32_t r = int32_t(threadIdx.y); r < kTile; r += kRows) {
        const int32_t j = j0 + r, i = i0 + int32_t(threadIdx.x);
        tile[r][threadIdx.x] = j < rows_s && i < cols_s ? to_f32(s[int64_t(j) * cols_s + i]) : 0.f;
      }
      __syncthreads();
      for (int32_t r = int32_t(threadIdx.y); r < kTile; r += kRows) {
        const int32_t i = i0 + r, j = j0 + int32_t(threadIdx.x);
        if (i < rows_d && j < cols_d) d[int64_t(i) * cols_d + j] = from_f32<D>(tile[threadIdx.x][r]);
      }
    }
  }
}

// A filter gradient back from the 16-bit (K, R, S, cp) layout a row at a time: block k reads row k
// (R S x cp values, contiguous) into shared memory and writes its (C, R S) f32 values (contiguous)
// in order, both sides coalesced. relayout_kernel read the copy at a stride of cp, one 2-byte value a
// thread (resnet18_cifar's 20 filter gradients: 69 us a step on an H200).
constexpr int64_t kFilterRowBytes = 48 * 1024;  // R S (cp + 1) floats of shared memory at most

template <class S>
__global__ void __launch_bounds__(256)
    krsc_rows_to_filter_kernel(const S* __restrict__ src, float* __restrict__ dst, int32_t c, int32_t cp,
                               int32_t rs) {
  extern __shared__ float filter_row[];  // [rs][cp + 1]
  const int32_t pitch = cp + 1, n_src = rs * cp, n_dst = c * rs;
  const S* s = src + int64_t(blockIdx.x) * n_src;
  float* d = dst + int64_t(blockIdx.x) * n_dst;
  for (int32_t e = int32_t(threadIdx.x); e < n_src; e += 256) {  // e = p cp + ch
    const int32_t p = e / cp;
    filter_row[p * pitch + (e - p * cp)] = to_f32(s[e]);
  }
  __syncthreads();
  for (int32_t e = int32_t(threadIdx.x); e < n_dst; e += 256) {  // e = ch rs + p
    const int32_t ch = e / rs;
    d[e] = filter_row[(e - ch * rs) * pitch + ch];
  }
}

template <class D, class S>
void relayout(const S* src, bool src_nhwc, int64_t src_c, D* dst, bool dst_nhwc, int64_t dst_c, int64_t b,
              int64_t positions, cudaStream_t stream) {
  const int64_t n = b * dst_c * positions;
  if (n <= 0) return;
  // Tiles where both sides of the matrix fill them: filters (3x3: 9 positions) and a network's input
  // (3 channels) leave most of a 32 x 32 tile idle, and one thread a value reads them better.
  const int64_t limit = int64_t(1) << 30;  // a sample's matrices index in 32 bits
  if (src_nhwc != dst_nhwc && std::min(src_c, dst_c) >= kTile && positions >= kTile &&
      src_c * positions < limit && dst_c * positions < limit) {
    const int64_t rows_s = src_nhwc ? positions : src_c, cols_s = src_nhwc ? src_c : positions;
    const int64_t rows_d = dst_nhwc ? positions : dst_c, cols_d = dst_nhwc ? dst_c : positions;
    const int64_t tiles_x = (cols_d + kTile - 1) / kTile, tiles_y = (rows_d + kTile - 1) / kTile;
    if (tiles_x <= 65535) {
      const dim3 grid(unsigned(tiles_x), unsigned(std::min<int64_t>(tiles_y, 65535)),
                      unsigned(std::min<int64_t>(b, 65535)));
      transpose_tiles_kernel<D, S><<<grid, dim3(kTile, kRows), 0, stream>>>(
          src, int32_t(rows_s), int32_t(cols_s), dst, int32_t(rows_d), int32_t(cols_d), b);
      CUDA_CHECK_LAUNCH();
      return;
    }
  }
  with_index_type({n, b * src_c * positions}, [&](auto index) {
    using I = decltype(index);
    relayout_kernel<D, S, I><<<grid_for(n), kThreads, 0, stream>>>(src, src_nhwc, I(src_c), dst, dst_nhwc,
                                                                   I(dst_c), I(b), I(positions));
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_relayout(DType t, const void* src, bool src_nhwc, int64_t src_c, void* dst, bool dst_nhwc,
                     int64_t dst_c, int64_t b, int64_t positions, cudaStream_t stream) {
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    relayout(static_cast<const T*>(src), src_nhwc, src_c, static_cast<T*>(dst), dst_nhwc, dst_c, b, positions,
             stream);
  });
}

void launch_nchw_to_nhwc(DType t, const void* src, void* dst, int64_t b, int64_t c, int64_t h, int64_t w,
                         cudaStream_t stream) {
  launch_relayout(t, src, false, c, dst, true, c, b, h * w, stream);
}

void launch_nhwc_to_nchw(DType t, const void* src, void* dst, int64_t b, int64_t c, int64_t h, int64_t w,
                         cudaStream_t stream) {
  launch_relayout(t, src, true, c, dst, false, c, b, h * w, stream);
}

// A filter (K, C, R, S) is a batch of K tensors (C, R*S): the same relayouts, with K as the batch.
void launch_filter_to_krsc(const float* w, DType t, void* dst, int64_t k, int64_t c, int64_t cp, int64_t r,
                           int64_t s, cudaStream_t stream) {
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    relayout(w, false, c, static_cast<T*>(dst), true, cp, k, r * s, stream);
  });
}

void launch_krsc_to_filter(DType t, const void* src, float* dw, int64_t k, int64_t c, int64_t cp, int64_t r,
                           int64_t s, cudaStream_t stream) {
  const int64_t rs = r * s, bytes = rs * (cp + 1) * int64_t(sizeof(float));
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if (k > 0 && k < (int64_t(1) << 31) && c > 0 && c <= cp && rs > 0 && bytes <= kFilterRowBytes) {
      krsc_rows_to_filter_kernel<T><<<unsigned(k), 256, size_t(bytes), stream>>>(
          static_cast<const T*>(src), dw, int32_t(c), int32_t(cp), int32_t(rs));
      CUDA_CHECK_LAUNCH();
      return;
    }
    relayout(static_cast<const T*>(src), true, cp, dw, false, c, k, rs, stream);
  });
}

}  // namespace trainer::cuda
