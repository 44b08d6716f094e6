// Global-norm gradient clipping on the GPU, all in device memory (kernels/cpu/clip_grad_norm.cc
// is the reference): kClipPartials blocks each sum the squares of one fixed chunk, one block
// totals them and writes the factor into the record, and a scaling pass reads it.
//   g: (n)  partials: (kClipPartials) doubles  record: ClipRecord, device memory
#pragma once

#include <cuda_runtime.h>

#include "lib/backend/step_kernels.h"

namespace trainer::cuda {

void launch_clip_grad_norm(float* g, int64_t n, float max_norm, double* partials, ClipRecord* record,
                           cudaStream_t stream);
// The norm and the factor only (ClipKernel::norm_only): the optimizer step scales as it reads;
// bit ORed into s->nonfinite when the norm is not finite.
void launch_clip_norm_only(const float* g, int64_t n, float max_norm, double* partials, ClipRecord* record,
                           StepScalars* s, uint32_t bit, cudaStream_t stream);
// The two phases for gradients spread over pipeline stages (ClipKernel::by_partials):
//   partials: (kClipPartials) doubles; then (groups * kClipPartials), every stage's.
void launch_clip_sum_squares(const float* g, int64_t n, double* partials, cudaStream_t stream);
void launch_clip_by_partials(float* g, int64_t n, float max_norm, const double* partials, int groups,
                             ClipRecord* record, cudaStream_t stream);

}  // namespace trainer::cuda
