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
template <class D, class S>
__global__ void relayout_kernel(const S* src, bool src_nhwc, int64_t src_c, D* dst, bool dst_nhwc,
                                int64_t dst_c, int64_t b, int64_t positions) {
  const int64_t n = b * dst_c * positions;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    int64_t c, pos, sample;
    if (dst_nhwc) {
      c = i % dst_c;
      pos = (i / dst_c) % positions;
    } else {
      pos = i % positions;
      c = (i / positions) % dst_c;
    }
    sample = i / (dst_c * positions);
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
  relayout_kernel<D, S>
      <<<grid_for(n), kThreads, 0, stream>>>(src, src_nhwc, src_c, dst, dst_nhwc, dst_c, b, positions);
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
