// layer_norm / rms_norm on the GPU (lib/layers/layer_norm.h; kernels/cpu/layer_norm_cpu.cc is the
// reference): a block per row for the statistics, y and dx; the parameter gradients in two
// deterministic passes (partial sums over fixed chunks of rows, then the chunks in order).
//   x, y, dx, dy: (rows, d) of dtype t (f32, bf16, fp16; the arithmetic in f32)   w, b, dw, db: (d) f32
//   stats: (rows, 2) mean and 1/std (1/rms) partials: (layer_norm_chunks(rows), 2, d) floats of scratch
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "lib/backend/layer_kernel.h"

namespace trainer::cuda {

// How many chunks of rows the parameter gradients are summed in.
int64_t layer_norm_chunks(int64_t rows, int64_t d);

// b may be null (rms_norm, or layer_norm without bias): no shift. rms: no mean is subtracted.
void launch_layer_norm_forward(DType t, const void* x, const float* w, const float* b, void* y, float* stats,
                               int64_t rows, int64_t d, float eps, bool rms, cudaStream_t stream);
// dx may be null (not wanted); db may be null (no bias).
void launch_layer_norm_backward(DType t, const void* x, const void* dy, const float* w, const float* stats,
                                void* dx, float* dw, float* db, float* partials, int64_t rows, int64_t d,
                                bool rms, cudaStream_t stream);

}  // namespace trainer::cuda
