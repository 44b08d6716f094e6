// A relu fused into the kernel before it (KernelContext::fused_relu), one rule for the CPU and
// CUDA kernels, the relu kernels' own (eltwise: x > 0 ? x : 0 x; backward x > 0 ? dy : 0 dy): the
// stored output is z = relu(y), and the backward reads the output's gradient through z's mask. A
// NaN stays NaN and 0 * dz keeps a non-finite dz visible to the non-finite guard, as unfused.
#pragma once

#include "lib/core/host_device.h"

namespace trainer {

TRAINER_HD float relu_forward(float y) { return y > 0.f ? y : y * 0.f; }
// The gradient at the relu's input from its output z and the gradient dz there.
TRAINER_HD float relu_grad_from_output(float z, float dz) { return z > 0.f ? dz : dz * 0.f; }

}  // namespace trainer
