// Layout conversions of channels_last.h: one thread per element of the destination, reading the
// source at the transposed index (they run only at the edges of channels-last chains and on
// filters).
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

template <class D, class S>
void relayout(const S* src, bool src_nhwc, int64_t src_c, D* dst, bool dst_nhwc, int64_t dst_c, int64_t b,
              int64_t positions, cudaStream_t stream) {
  const int64_t n = b * dst_c * positions;
  if (n <= 0) return;
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
  with_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    relayout(static_cast<const T*>(src), true, cp, dw, false, c, k, r * s, stream);
  });
}

}  // namespace trainer::cuda
