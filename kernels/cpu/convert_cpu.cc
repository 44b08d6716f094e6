// Backend::convert on the CPU: dst = src (or dst += src) between f32 and bf16, rounding to nearest
// even (lib/core/bf16.h); the sum is formed in f32. f32 -> f32 with accumulate is
// cpu::accumulate (a gradient of a tensor with several consumers). The CPU keeps activations f32
// (its bf16 kernels convert at their own edges), so the executor only calls f32 -> f32 here; the
// bf16 cases serve tests and tools.
#include <cstring>

#include "kernels/cpu/cpu_ops.h"
#include "lib/core/bf16.h"
#include "lib/core/error.h"

namespace trainer {

void cpu::convert(void* dst, DType dst_type, const void* src, DType src_type, int64_t n, bool accumulate) {
  if (dst_type == DType::f16 || src_type == DType::f16)
    throw InternalError("the CPU backend does not convert fp16 tensors");
  if (n <= 0) return;
  if (dst_type == DType::f32 && src_type == DType::f32) {
    if (accumulate)
      cpu::accumulate(static_cast<float*>(dst), static_cast<const float*>(src), n);
    else
      std::memcpy(dst, src, size_t(n) * sizeof(float));
    return;
  }
  auto load = [&](int64_t i) {
    return src_type == DType::f32 ? static_cast<const float*>(src)[i]
                                  : float_from_bf16(static_cast<const uint16_t*>(src)[i]);
  };
  if (dst_type == DType::f32) {
    float* d = static_cast<float*>(dst);
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; ++i) d[i] = accumulate ? d[i] + load(i) : load(i);
  } else {
    uint16_t* d = static_cast<uint16_t*>(dst);
#pragma omp parallel for if (n > 65536)
    for (int64_t i = 0; i < n; ++i)
      d[i] = bf16_from_float(accumulate ? float_from_bf16(d[i]) + load(i) : load(i));
  }
}

}  // namespace trainer
