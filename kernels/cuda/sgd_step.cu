// torch.optim.SGD: momentum, dampening, Nesterov, L2 weight decay.
//   g' = g + wd*w;  b = g' on the first step (s->step == 0), else mu*b + (1-dampening)*g'
//   d = nesterov ? g' + mu*b : b;  w -= lr*d
// lr and step are read from device memory (graph-capturable). Every multiply and add is an
// explicitly rounded intrinsic, so no FMA contraction happens and the result matches the CPU's
// unfused float arithmetic bit for bit.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/sgd_step.cuh"

namespace trainer::cuda {
namespace {

__global__ void sgd_kernel(SgdHyper h, float* w, const float* g, float* velocity, int64_t n,
                           const StepScalars* s) {
  if (s->nonfinite & kNonfiniteSkipsUpdate) return;  // non-finite loss or gradient: no update
  const float lr = s->lr, mu = h.momentum, wd = h.weight_decay, damp = 1.f - h.dampening;
  const bool first = s->step == 0;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float wi = w[i];
    float gi = __fadd_rn(g[i], __fmul_rn(wd, wi));
    if (mu != 0.f) {
      const float b = first ? gi : __fadd_rn(__fmul_rn(mu, velocity[i]), __fmul_rn(damp, gi));
      velocity[i] = b;
      gi = h.nesterov ? __fadd_rn(gi, __fmul_rn(mu, b)) : b;
    }
    w[i] = __fsub_rn(wi, __fmul_rn(lr, gi));
  }
}

}  // namespace

void launch_sgd_step(const SgdHyper& h, float* w, const float* g, float* velocity, int64_t n,
                     const StepScalars* s, cudaStream_t stream) {
  if (n <= 0) return;
  sgd_kernel<<<grid_for(n), kThreads, 0, stream>>>(h, w, g, velocity, n, s);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
