// Which CUDA kernel runs each layer type (backend name "cuda"). flatten is a view: no kernel.
// Under math bf16 (fp16): dense and convolutions run in bf16 (low, conv; convolutions only with a
// multiple of 8 filters); batchnorm, activations,
// pooling and add (follow) in bf16 when their inputs arrive in bf16. The executor converts to and from f32
// around the others. Those that also take a channels-last input (kernels/cuda/channels_last.h), which only
// bf16 convolutions produce, are registered with kAnyInputLayout; channels-last permutes the elements
// without padding (kDenseLayout), so a residual network stays channels-last through its adds and
// the tensors that feed two layers. A convolution's or dense layer's bias before a batchnorm goes
// into the batchnorm (kBiasToBatchnorm, kTakesBias), and a batchnorm whose output a pooling alone
// reads has the pooling normalize as it reads (kHandsOverNormalize, kTakesNormalize).
#include "kernels/cuda/cuda_kernels.h"
#include "lib/losses/losses.h"
#include "lib/optim/optimizer.h"
#include "lib/registry/registry.h"

namespace trainer {

void register_cuda_kernels(Registry& r) {
  const unsigned low = kLowPrecisionActivations, conv = low | kAnyInputLayout | kDenseLayout |
                                                        kLowPrecisionChannelsOf8 | kFusesRelu |
                                                        kBiasToBatchnorm;
  const unsigned follow = low | kFollowsInputDtype, follow_any = follow | kAnyInputLayout | kDenseLayout;
  r.add_kernel("dense", "cuda", make_dense_cuda, low | kBiasToBatchnorm | kFusesGeluTanh | kTakesGeluGrad);
  r.add_kernel("conv2d", "cuda", make_conv2d_cuda, conv);
  r.add_kernel("maxpool2d", "cuda", make_pool2d_cuda, follow_any | kFusesRelu | kTakesNormalize);
  r.add_kernel("avgpool2d", "cuda", make_pool2d_cuda, follow_any | kFusesRelu | kTakesNormalize);
  r.add_kernel("embedding", "cuda", make_embedding_cuda);
  r.add_kernel("conv1d", "cuda", make_conv1d_cuda, conv);
  r.add_kernel("maxpool1d", "cuda", make_pool1d_cuda, follow_any | kFusesRelu);
  r.add_kernel("avgpool1d", "cuda", make_pool1d_cuda, follow_any | kFusesRelu);
  r.add_kernel("global_avg_pool", "cuda", make_global_avg_pool_cuda);
  r.add_kernel("global_max_pool", "cuda", make_global_max_pool_cuda);
  r.add_kernel("add", "cuda", make_add_cuda,
               follow_any | kCopiesOutputGradient | kHandsOverForward | kFusesRelu);
  r.add_kernel("concat", "cuda", make_concat_cuda);
  r.add_kernel("batchnorm", "cuda", make_batchnorm_cuda,
               follow_any | kFusesRelu | kTakesBias | kHandsOverNormalize);
  // A transformer's residual stream: the position embedding starts it in the activation dtype,
  // and the norms, dropouts and adds keep it there (no conversions around each block's layers).
  r.add_kernel("dropout", "cuda", make_dropout_cuda, follow);
  r.add_kernel("layer_norm", "cuda", make_layer_norm_cuda, low | kMemoryBound | kTakesAddForward);
  r.add_kernel("rms_norm", "cuda", make_layer_norm_cuda, low | kMemoryBound | kTakesAddForward);
  r.add_kernel("position_embedding", "cuda", make_position_embedding_cuda, low | kMemoryBound);
  r.add_kernel("multi_head_attention", "cuda", make_attention_cuda, low);
  r.add_kernel("lstm", "cuda", make_recurrent_cuda);
  r.add_kernel("gru", "cuda", make_recurrent_cuda);
  r.add_kernel("dropout2d", "cuda", make_dropout_cuda, follow);
  for (const char* t : {"relu", "sigmoid", "tanh", "gelu", "leaky_relu"})
    r.add_kernel(t, "cuda", make_eltwise_cuda, follow_any);
  r.add_kernel("softmax", "cuda", make_softmax_cuda);
  r.add_kernel("log_softmax", "cuda", make_softmax_cuda);
  LossRegistry& losses = LossRegistry::global();
  for (const char* t : {"nll", "cross_entropy", "sparse_categorical_crossentropy"})
    losses.add_kernel(t, "cuda", make_classification_loss_cuda);
  for (const char* t : {"mse", "mae", "l1", "huber", "smooth_l1", "binary_cross_entropy"})
    losses.add_kernel(t, "cuda", make_value_loss_cuda);
  register_cuda_optimizers(OptimizerRegistry::global());
  StepKernelRegistry::global().add("cuda", cuda_step_kernels());
}

}  // namespace trainer
