// Batch normalization kernels on the GPU with the CPU's semantics (kernels/cpu/batchnorm_cpu.cc,
// lib/layers/batchnorm.h): per channel c of x: (B, C, S), n = B * S values.
//   training forward: mean and biased variance of the batch; y = gamma (x - mean) / sqrt(var +
//     eps) + beta; running_mean = (1 - m) running_mean + m mean, running_var = (1 - m)
//     running_var + m var n / (n - 1) (PyTorch's convention; the factor is 1 when n = 1);
//   eval forward: the running statistics instead, nothing updated;
//   backward after training: the full batch-statistics gradient
//     dbeta = sum dy, dgamma = sum dy xhat, dx = gamma inv (dy - dbeta / n - xhat dgamma / n);
//   backward after eval: the statistics held constant, dx = gamma inv dy.
// Reductions: each channel's n values are split into `parts` contiguous pieces, one block each,
// summed in double (per thread, then a fixed tree); a per-channel pass adds the pieces in order.
// Channels-last by packs (channel_packs.cuh) the gradient's sums of 16-bit values are added in
// float a thread (tens of centred terms), then in double.
// No atomics: results repeat bit for bit. Variance = E[x^2] - mean^2 in double.
// x, y, dy, dx are of dtype t (f32, bf16, fp16; read and computed in f32); parameters,
// statistics and their gradients are f32.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "lib/backend/layer_kernel.h"

namespace trainer::cuda {

struct BatchNormGeometry {
  int64_t batch = 0, channels = 0, spatial = 0;
  int64_t parts = 1;     // blocks per channel in the reductions
  int64_t part_len = 0;  // values per block (the last may have fewer)
  // x, y and their gradients stored channels-last (B, S, C): the reductions then run over blocks
  // of 32 channels x 8 rows (coalesced along the channels), `parts` pieces of the B * S rows; with
  // whole 16-byte packs a row, over pack_tiles(kPack, channels) tiles (channel_packs.cuh).
  bool channels_last = false;
  // constexpr: device code calls it too (--expt-relaxed-constexpr).
  constexpr int64_t count() const { return batch * spatial; }
};

// Chooses the split from the shape and dtype alone (the same on every GPU).
BatchNormGeometry batchnorm_geometry(int64_t batch, int64_t channels, int64_t spatial,
                                     bool channels_last = false, DType t = DType::f32);

// Scratch of the reductions: 2 * channels * parts doubles.
inline size_t batchnorm_partial_bytes(const BatchNormGeometry& g) {
  return size_t(2 * g.channels * g.parts) * sizeof(double);
}

// A taken bias (KernelContext::takes_bias; null: none): x lacks the bias b of the layer before.
// The batch statistics of x + b are mean(x) + b and var(x), and x + b - mean(x + b) = x - mean(x),
// so only the running mean (mean + b), the eval normalization (by running mean - b) and b's
// gradient (dbias below) see it.
// Training: batch statistics into mean / inv (= 1 / sqrt(var + eps)) and the running update.
void launch_batchnorm_batch_stats(const BatchNormGeometry& g, DType t, const void* x, float momentum,
                                  float eps, double* partial, float* mean, float* inv, float* running_mean,
                                  float* running_var, cudaStream_t stream, const float* bias = nullptr);
// Eval: mean / inv from the running statistics.
void launch_batchnorm_running_stats(const BatchNormGeometry& g, const float* running_mean,
                                    const float* running_var, float eps, float* mean, float* inv,
                                    cudaStream_t stream, const float* bias = nullptr);
// y = (x - mean) * (gamma * inv) + beta; relu: y = relu(that) (a fused relu, rounded as the
// separate relu kernel would see it).
// Whether a channels-last batchnorm's passes go by packs with these pointers (null ones skipped;
// channel_packs.cuh): the backward passes then take a fused relu's mask from x, never reading the
// stored output (NormalizeHandoff).
bool batchnorm_by_packs(const BatchNormGeometry& g, DType t, std::initializer_list<const void*> pointers);
void launch_batchnorm_normalize(const BatchNormGeometry& g, DType t, const void* x, const float* mean,
                                const float* inv, const float* gamma, const float* beta, bool relu, void* y,
                                cudaStream_t stream);
// dgamma, dbeta, dbias when not null (overwritten: 0 with batch statistics, gamma inv sum dy with
// the running ones) and, when dx is not null, dx (overwritten). batch_stats: mean / inv
// came from this batch (training forward), so dx includes their gradient. coef: 3 * channels
// floats of scratch. z: a fused relu's output (the forward's y), dy then being the relu's output
// gradient: the batchnorm's is z > 0 ? dy : 0 (null: no relu). The same z in the calls below.
// Channels-last by packs the mask comes from x instead (y > 0 where z > 0, y recomputed with the
// forward's arithmetic from mean, inv, gamma and beta, which must be the forward's), z unread.
void launch_batchnorm_backward(const BatchNormGeometry& g, DType t, const void* x, const void* dy,
                               const void* z, const float* mean, const float* inv, const float* gamma,
                               const float* beta, bool batch_stats, double* partial, float* coef,
                               float* dgamma, float* dbeta, void* dx, cudaStream_t stream,
                               float* dbias = nullptr);

// Synchronized statistics (device.sync_batchnorm; lib/core/batchnorm_sync_formula.h): the same
// partial sums, finished into one vector of sums per shard, which the replicas all-reduce between
// these calls, and the finishing steps from the all-reduced sums.
//   stat sums: [sum x, sum x^2] per channel, then the shard's count of values: 2 C + 1 doubles;
//   grad sums: [D1, D2] per channel, this shard's sums of dy and dy (x - mean), each times the
//   shard weight *weight (device memory, read when the kernel runs): 2 C doubles.
void launch_batchnorm_stat_sums(const BatchNormGeometry& g, DType t, const void* x, double* partial,
                                double* sums, cudaStream_t stream);
// mean / inv and the running update from the replicas' stat sums (a replica without rows too).
void launch_batchnorm_stats_from_sums(int64_t channels, const double* sums, float momentum, float eps,
                                      float* mean, float* inv, float* running_mean, float* running_var,
                                      cudaStream_t stream, const float* bias = nullptr);
// This shard's dgamma and dbeta (overwritten: the gradient all-reduce sums them) and its grad sums.
void launch_batchnorm_grad_sums(const BatchNormGeometry& g, DType t, const void* x, const void* dy,
                                const void* z, const float* mean, const float* inv, const float* gamma,
                                const float* beta, const float* weight, double* partial, double* sums,
                                float* dgamma, float* dbeta, cudaStream_t stream, float* dbias = nullptr);
// dx (overwritten) from the replicas' grad sums; coef: 3 * channels floats of scratch.
void launch_batchnorm_dx_from_sums(const BatchNormGeometry& g, DType t, const void* x, const void* dy,
                                   const void* z, const float* mean, const float* inv, const float* gamma,
                                   const float* beta, const double* sums, float* coef, void* dx,
                                   cudaStream_t stream);

}  // namespace trainer::cuda
