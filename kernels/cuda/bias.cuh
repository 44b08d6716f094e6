// Per-channel bias for dense and conv2d on the GPU.
//   y, dy: (B, F, spatial) (spatial = 1 for dense, OH*OW for conv2d) of dtype t (f32, bf16, fp16;
//   summed in f32 / double)  bias, dbias: (F) f32
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "lib/backend/layer_kernel.h"

namespace trainer::cuda {

// y += bias (broadcast over batch and spatial positions), then y = relu(y) with `relu` (a relu
// fused into the layer: x > 0 ? x : 0 * x, as the eltwise kernels).
// nhwc: y is stored channels-last (B, spatial, F).
void launch_bias_add(DType t, void* y, const float* bias, int64_t batch, int64_t channels, int64_t spatial,
                     bool nhwc, cudaStream_t stream, bool relu = false);

// How the bias gradient splits each channel's batch * spatial values over blocks: `parts`
// blocks per channel, so that a few channels with many values (a first convolution: 10 filters
// x 200 x 576 positions) still fill the GPU. From the shape alone: the same on every GPU.
// Channels-last dy (B, spatial, F) is summed by blocks of 32 channels x 8 rows instead, each
// block over `parts` of the batch * spatial rows (coalesced reads along the channels).
struct BiasGradSplit {
  int64_t batch = 0, channels = 0, spatial = 0;
  int64_t parts = 1, part_len = 0;
  bool nhwc = false;  // channels-last dy; by packs where its rows fill them (pack_tiles, channel_packs.cuh)
};
BiasGradSplit bias_grad_split(int64_t batch, int64_t channels, int64_t spatial, bool nhwc = false,
                              DType t = DType::f32);
// Scratch for the per-block sums (0 when parts = 1: the blocks write dbias directly).
size_t bias_grad_scratch_bytes(const BiasGradSplit& s);

// dbias = sum over batch and spatial of dy (overwrites), summed in double. Deterministic: each
// block sums its piece in a fixed tree, and the pieces of a channel are added in order (no
// atomics). scratch: bias_grad_scratch_bytes(s) bytes (may be null when that is 0).
void launch_bias_grad(const BiasGradSplit& s, DType t, const void* dy, float* dbias, double* scratch,
                      cudaStream_t stream);

}  // namespace trainer::cuda
