// The recurrences of lstm / gru with W_hh on chip (lib/layers/recurrent.h; recurrent.cuh is the
// version that reads W_hh from L2 every step, which the layer falls back to).
//
// A cluster of C blocks (Hopper's thread block clusters; C = 1 on older GPUs) carries S rows of
// the batch. Block q of the cluster owns the units q U .. q U + U - 1 (U = H / C) and keeps in
// shared memory the rows of W_hh its units' gates read (forward) or the columns its units' h
// feeds (backward): C = 2 holds an LSTM of 128 units (256 KB of weights) on two SMs; up to 128
// units each thread keeps its row of W_hh in registers instead. Per step the
// blocks exchange h (forward) or the gates' gradients (backward) through distributed shared
// memory, double-buffered, with one cluster barrier a step. Same cells and arithmetic as the other
// kernels (lib/core/recurrent_formula.h); the sums over W_hh run in another order, so the results
// agree with them to rounding, not bit for bit.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/recurrent.cuh"

namespace trainer::cuda {

struct RecurrentCluster {
  int blocks = 0;          // C, the blocks of a cluster; 0: W_hh does not fit on chip (use recurrent.cuh)
  int samples = 1;         // S, batch rows a cluster carries
  bool registers = false;  // each thread keeps its row (column) of W_hh in registers, not shared memory
  size_t forward_smem = 0, backward_smem = 0;
};

// The cluster shape for pass p on `device` (0 blocks when none fits), with the kernels opted in to
// its shared memory. Called once, when a kernel is created.
RecurrentCluster plan_recurrent_cluster(const RecurrentPass& p, int device);

// As launch_recurrent_forward, from W_hh itself (G H, H) instead of its transpose.
void launch_recurrent_forward_cluster(const RecurrentPass& p, const RecurrentCluster& c,
                                      const RecurrentTensors* t, cudaStream_t stream);
// As launch_recurrent_backward.
void launch_recurrent_backward_cluster(const RecurrentPass& p, const RecurrentCluster& c,
                                       const RecurrentTensors* t, const float* dy, int64_t out, bool seq,
                                       cudaStream_t stream);

}  // namespace trainer::cuda
