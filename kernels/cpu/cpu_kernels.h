// Factories of the CPU layer kernels, one per kernels/cpu/<op>_cpu.cc; registered in
// register_cpu_kernels.cc.
#pragma once

#include <memory>

#include "lib/backend/layer_kernel.h"
#include "lib/backend/loss_kernel.h"
#include "lib/backend/step_kernels.h"

namespace trainer {

class Registry;
class OptimizerRegistry;

// Adds every CPU kernel to `r` under the backend name "cpu" (called by register_backends()).
void register_cpu_kernels(Registry& r);
// Adds the CPU step of every optimizer (kernels/cpu/optimizer_steps.cc).
void register_cpu_optimizers(OptimizerRegistry& r);

std::unique_ptr<LayerKernel> make_conv2d_cpu(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_dense_cpu(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_pool2d_cpu(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_eltwise_cpu(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_softmax_cpu(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_dropout_cpu(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_dropout2d_cpu(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_embedding_cpu(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_conv1d_cpu(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_pool1d_cpu(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_global_avg_pool_cpu(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_batchnorm_cpu(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_global_max_pool_cpu(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_add_cpu(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_concat_cpu(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_layer_norm_cpu(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_attention_cpu(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_recurrent_cpu(const Layer& l, const KernelContext& ctx);
std::unique_ptr<LayerKernel> make_position_embedding_cpu(const Layer& l, const KernelContext& ctx);
// The losses (lib/losses), registered in the loss registry: on class indices
// (classification_loss.cc) and on float targets (value_loss_cpu.cc).
std::unique_ptr<LossKernel> make_classification_loss_cpu(const LossSpec& s);
std::unique_ptr<LossKernel> make_value_loss_cpu(const LossSpec& s);

// The step's guard, loss scaling, clipping and augmentation (step_kernels_cpu.cc).
StepKernelSet cpu_step_kernels();

}  // namespace trainer
