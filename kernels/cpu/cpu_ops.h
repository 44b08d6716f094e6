// Hand-written CPU ops that oneDNN has no primitive for; one op per .cc file beside this header.
// Shapes: out/dout (B, C); labels (B); parameter arenas are flat (n).
#pragma once

#include <cstdint>

#include "lib/backend/loss_kernel.h"
#include "lib/backend/step_kernels.h"

namespace trainer::cpu {

// C = alpha op(A) op(B) + beta C through oneDNN's sgemm, row-major, leading dimensions in
// elements; op 'N' or 'T'. Throws InternalError if oneDNN fails (cpu_gemm.cc).
void gemm(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// The column sums of a (rows, cols) matrix into out (overwritten), in double: blocks of columns over
// threads, each column's rows in order, so the result does not depend on the thread count.
void column_sums(const float* m, int64_t rows, int64_t cols, float* out);

// smoothing: label smoothing, target (1 - s) one_hot + s / C (PyTorch's label_smoothing).
void classification_loss(ClassScores scores, const float* out, const int32_t* labels, int64_t batch,
                         int64_t classes, float* dout, float* loss_sum, float smoothing = 0.f,
                         const float* weights = nullptr);
// A loss over every position (LossSpec::positions > 1) on logits: rows = batch * positions,
// out/dout (rows, C), labels (rows); the mean over the labels that are not `ignore`, so dout is
// (softmax - one_hot) / counted on those rows and 0 on ignored ones. row_loss: `rows` doubles of
// scratch. loss_sum += the mean times `batch`; sums (not null): the correct argmaxes and the
// labels counted are added to sums[0] and sums[1].
void token_loss(const float* out, const int32_t* labels, int64_t rows, int64_t classes, int32_t ignore,
                int64_t batch, float* dout, float* loss_sum, double* row_loss, float* sums);
void confusion_accumulate(const float* out, const int32_t* labels, int64_t batch, int64_t classes,
                          float* confusion);
void topk_correct(const float* out, const int32_t* labels, int64_t batch, int64_t classes, int64_t k,
                  float* correct);
// Random crop and flip of a training batch (lib/core/augment_formula.h).  in, out: (B, C, H, W)
void augment(const AugmentSpec& spec, const float* in, float* out, int64_t batch, const StepScalars& s);
// The non-finite guard (lib/backend/step_kernels.h).
void check_finite(const float* x, int64_t n, uint32_t bit, StepScalars& s);
void commit_step(const StepScalars& s, int64_t batch, float* loss_sum, NonfiniteRecord& r);
// Loss scaling (lib/backend/step_kernels.h, LossScaleState; kernels/cpu/loss_scale.cc).
void scale_loss_gradient(float* dout, int64_t n, const LossScaleState& st);
void unscale_gradients(float* g, int64_t n, const LossScaleState& st, StepScalars& s);
void update_loss_scale(const LossScaleHyper& h, LossScaleState& st, const StepScalars& s);
// Clipping by the global norm in two phases (ClipKernel): g (n); partials: kClipPartials doubles a group.
void clip_grad_sum_squares(const float* g, int64_t n, double* partials);
void clip_grad_by_partials(float* g, int64_t n, float max_norm, const double* partials, int groups,
                           ClipRecord* record);
// Dropout: y = x * mask / (1 - rate); mask kept (as 0/scale floats) for backward.
// channel_size = 1 for element-wise, H*W for dropout2d.
void dropout_forward(const float* x, float* y, float* mask, int64_t n, int64_t channel_size, float rate,
                     uint64_t seed, uint64_t stream);
void dropout_backward(const float* dy, const float* mask, float* dx, int64_t n);
// dst += src (n floats): a gradient of a tensor with several consumers (kernels/cpu/add_cpu.cc).
void accumulate(float* dst, const float* src, int64_t n);
// Backend::convert (kernels/cpu/convert_cpu.cc): f32 and bf16.
void convert(void* dst, DType dst_type, const void* src, DType src_type, int64_t n, bool accumulate);

}  // namespace trainer::cpu
