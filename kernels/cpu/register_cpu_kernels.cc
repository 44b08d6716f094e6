// Which CPU kernel runs each layer type.
#include "kernels/cpu/cpu_kernels.h"
#include "lib/layers/activation.h"
#include "lib/losses/losses.h"
#include "lib/optim/optimizer.h"
#include "lib/registry/registry.h"

namespace trainer {

// any_layout: the kernel takes its input in the layout the previous kernel prefers (oneDNN's
// blocked nChw16c, nCw16c...), so convolutions, pooling and activations chain without reorders.
// No CPU kernel takes low-precision activations: in math bf16 the CPU converts at each kernel's
// edge (Backend::activation_dtype is f32 here).
void register_cpu_kernels(Registry& r) {
  const unsigned any_layout = kAnyInputLayout;
  r.add_kernel("dense", "cpu", make_dense_cpu);
  r.add_kernel("conv2d", "cpu", make_conv2d_cpu, any_layout);
  r.add_kernel("maxpool2d", "cpu", make_pool2d_cpu, any_layout);
  r.add_kernel("avgpool2d", "cpu", make_pool2d_cpu, any_layout);
  r.add_kernel("embedding", "cpu", make_embedding_cpu);
  r.add_kernel("conv1d", "cpu", make_conv1d_cpu, any_layout);
  r.add_kernel("maxpool1d", "cpu", make_pool1d_cpu, any_layout);
  r.add_kernel("avgpool1d", "cpu", make_pool1d_cpu, any_layout);
  r.add_kernel("global_avg_pool", "cpu", make_global_avg_pool_cpu);
  r.add_kernel("global_max_pool", "cpu", make_global_max_pool_cpu);
  r.add_kernel("batchnorm", "cpu", make_batchnorm_cpu, any_layout | kFusesRelu);
  r.add_kernel("add", "cpu", make_add_cpu, kCopiesOutputGradient);
  r.add_kernel("concat", "cpu", make_concat_cpu);
  r.add_kernel("dropout", "cpu", make_dropout_cpu);
  r.add_kernel("layer_norm", "cpu", make_layer_norm_cpu);
  r.add_kernel("rms_norm", "cpu", make_layer_norm_cpu);
  r.add_kernel("position_embedding", "cpu", make_position_embedding_cpu);
  r.add_kernel("multi_head_attention", "cpu", make_attention_cpu);
  r.add_kernel("lstm", "cpu", make_recurrent_cpu);
  r.add_kernel("gru", "cpu", make_recurrent_cpu);
  r.add_kernel("dropout2d", "cpu", make_dropout2d_cpu, any_layout);
  for (const char* t : {"relu", "sigmoid", "tanh", "gelu", "leaky_relu"})
    r.add_kernel(t, "cpu", make_eltwise_cpu, any_layout);
  r.add_kernel("softmax", "cpu", make_softmax_cpu);
  r.add_kernel("log_softmax", "cpu", make_softmax_cpu);
  LossRegistry& losses = LossRegistry::global();
  for (const char* t : {"nll", "cross_entropy", "sparse_categorical_crossentropy"})
    losses.add_kernel(t, "cpu", make_classification_loss_cpu);
  for (const char* t : {"mse", "mae", "l1", "huber", "smooth_l1", "binary_cross_entropy"})
    losses.add_kernel(t, "cpu", make_value_loss_cpu);
  register_cpu_optimizers(OptimizerRegistry::global());
  StepKernelRegistry::global().add("cpu", cpu_step_kernels());
}

}  // namespace trainer
