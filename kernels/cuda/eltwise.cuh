// Element-wise activations on the GPU: relu, leaky_relu, sigmoid, tanh, gelu (erf form).
// Same formulas as oneDNN's eltwise primitives used by the CPU backend; backward works from the
// input x (as the CPU does).  x, y, dy, dx: (n)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace trainer::cuda {

enum class Eltwise { relu, leaky_relu, sigmoid, tanh, gelu };

// alpha: leaky_relu's negative slope (relu: 0).
void launch_eltwise_forward(Eltwise kind, float alpha, const float* x, float* y, int64_t n,
                            cudaStream_t stream);
void launch_eltwise_backward(Eltwise kind, float alpha, const float* x, const float* dy, float* dx, int64_t n,
                             cudaStream_t stream);

}  // namespace trainer::cuda
