// Factories of the CUDA layer kernels, one per kernels/cuda/<op>_cuda.cc (pool_cuda.cc has both
// pooling ones); registered under the backend name "cuda" in register_cuda_kernels.cc.
#pragma once

#include <memory>

#include "lib/backend/layer_kernel.h"
#include "lib/backend/loss_kernel.h"
#include "lib/backend/step_kernels.h"

namespace trainer {

class Registry;
class OptimizerRegistry;

// Adds every CUDA kernel to `r` under the backend name "cuda" (called by register_backends()).
void register_cuda_kernels(Registry& r);
// Adds the CUDA step of every optimizer (kernels/cuda/optimizer_steps.cu).
void register_cuda_optimizers(OptimizerRegistry& r);

std::unique_ptr<LayerKernel> make_conv2d_cuda(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_dense_cuda(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_pool2d_cuda(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_eltwise_cuda(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_softmax_cuda(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_dropout_cuda(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_embedding_cuda(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_conv1d_cuda(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_pool1d_cuda(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_global_avg_pool_cuda(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_global_max_pool_cuda(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_add_cuda(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_concat_cuda(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_batchnorm_cuda(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_layer_norm_cuda(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_position_embedding_cuda(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_attention_cuda(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_recurrent_cuda(const Layer& l, const KernelContext& ctx);

// The losses (lib/losses), registered in the loss registry: on class indices
// (classification_loss_cuda.cc) and on float targets (value_loss_cuda.cc).
std::unique_ptr<LossKernel> make_classification_loss_cuda(const LossSpec& s);
std::unique_ptr<LossKernel> make_value_loss_cuda(const LossSpec& s);

// The step's guard, loss scaling, clipping and augmentation (step_kernels_cuda.cc).
StepKernelSet cuda_step_kernels();

namespace cuda {
// The cap on a 16-bit dense layer's buffer of padded rows (dense_cuda.cc: its products then run
// in chunks of rows), 256 MiB. Read when a kernel is made; tests lower it to run the chunks on
// small layers.
size_t& dense_pad_chunk_bytes();
}  // namespace cuda

}  // namespace trainer
