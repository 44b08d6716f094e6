// Element-wise activations on the GPU: relu, leaky_relu, sigmoid, tanh, gelu (erf form and tanh
// approximation).
// Same formulas as oneDNN's eltwise primitives used by the CPU backend; backward works from the
// input x (as the CPU does).  x, y, dy, dx: (n), all of dtype t (computed in f32)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "lib/backend/layer_kernel.h"

namespace trainer::cuda {

enum class Eltwise { relu, leaky_relu, sigmoid, tanh, gelu, gelu_tanh };

// alpha: leaky_relu's negative slope (relu: 0).
void launch_eltwise_forward(Eltwise kind, float alpha, DType t, const void* x, void* y, int64_t n,
                            cudaStream_t stream);
void launch_eltwise_backward(Eltwise kind, float alpha, DType t, const void* x, const void* dy, void* dx,
                             int64_t n, cudaStream_t stream);

}  // namespace trainer::cuda
