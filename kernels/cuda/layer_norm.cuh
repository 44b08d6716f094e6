// layer_norm / rms_norm on the GPU (lib/layers/layer_norm.h; kernels/cpu/layer_norm_cpu.cc is the
// reference): a warp (up to 8 for wide rows) a row, the row in registers and moved 16 bytes at a
// time where it is aligned; the backward in one pass over x and dy on a fixed grid of blocks, each
// writing its rows' dx and its partial parameter sums, then the blocks' sums per column in a fixed
// order (layer_norm.cu): deterministic, no atomics.
//   x, y, dx, dy: (rows, d) of dtype t (f32, bf16, fp16; the arithmetic in f32)   w, b, dw, db: (d) f32
//   stats: (rows, 2) mean and 1/std (1/rms)   partials: (layer_norm_chunks(rows, d), 2, d) floats of scratch
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "lib/backend/layer_kernel.h"

namespace trainer::cuda {

// How many blocks of rows the parameter gradients are summed in: the rows of `partials`.
int64_t layer_norm_chunks(int64_t rows, int64_t d);

// b may be null (rms_norm, or layer_norm without bias): no shift. rms: no mean is subtracted.
// x2 not null: the input is x + x2 (summed in f32 and rounded to t, as the add layer does), also
// written to sum (which may be x or x2): the add before a residual stream's layer norm.
void launch_layer_norm_forward(DType t, const void* x, const float* w, const float* b, void* y, float* stats,
                               int64_t rows, int64_t d, float eps, bool rms, cudaStream_t stream,
                               const void* x2 = nullptr, void* sum = nullptr);
// dx may be null (not wanted); accumulate: dx += the gradient (summed in f32, rounded once) rather
// than dx = it. db may be null (no bias). dw and db are overwritten.
void launch_layer_norm_backward(DType t, const void* x, const void* dy, const float* w, const float* stats,
                                void* dx, bool accumulate, float* dw, float* db, float* partials,
                                int64_t rows, int64_t d, bool rms, cudaStream_t stream);

}  // namespace trainer::cuda
