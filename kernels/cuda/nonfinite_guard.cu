// The non-finite guard: a grid-stride scan that ORs one bit into the step's scalars, and a
// one-thread commit at the end of the step. Finiteness is tested on the bits (exponent all ones)
// so that no fast-math flag can fold the test away.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/nonfinite_guard.cuh"
#include "lib/core/host_device.h"

namespace trainer::cuda {
namespace {

__global__ void check_finite_kernel(const float* x, int64_t n, uint32_t bit, StepScalars* s) {
  int bad = 0;
  for (int64_t i = global_index(); i < n; i += grid_stride()) bad |= int(nonfinite_bits(x[i]));
  // One atomic per block at most; blocks race only to set the same bit.
  if (__syncthreads_or(bad) && threadIdx.x == 0) atomicOr(&s->nonfinite, bit);
}

__global__ void commit_step_kernel(const StepScalars* s, int64_t batch, float* loss_sum, NonfiniteRecord* r) {
  const uint32_t what = s->nonfinite & kNonfiniteDiverged;  // a loss-scale overflow is no divergence
  if (what == 0) {
    *loss_sum += s->batch_loss;
    return;
  }
  if (r->steps == 0) {
    r->first_step = s->step + 1;
    r->first_what = what;
  }
  r->steps += 1;
  r->samples += uint64_t(batch);
  r->what |= what;
}

}  // namespace

void launch_check_finite(const float* x, int64_t n, uint32_t bit, StepScalars* s, cudaStream_t stream) {
  if (n <= 0) return;
  check_finite_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, n, bit, s);
  CUDA_CHECK_LAUNCH();
}

void launch_commit_step(const StepScalars* s, int64_t batch, float* loss_sum, NonfiniteRecord* record,
                        cudaStream_t stream) {
  commit_step_kernel<<<1, 1, 0, stream>>>(s, batch, loss_sum, record);
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
