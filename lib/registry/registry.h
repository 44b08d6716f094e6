// The one registry: layer type name -> how to parse it, and per backend how to run it.
//
// Registration is explicit (register_builtin_layers(), and register_backends() in kernels/ for the
// kernels) rather than by static registrars, which a static library would silently drop (Caffe's well-known
// trap).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "lib/backend/layer_kernel.h"
#include "lib/keys/key_spec.h"
#include "lib/registry/layer.h"

namespace trainer {

// Builds a layer from its validated keys (lib/keys/key_spec.h).
using LayerFactory = std::function<std::unique_ptr<Layer>(const KeyValues&)>;
// A macro layer: its validated keys -> the layers it stands for, one YAML mapping each
// ({type: dense, units: 4}, {type: relu}, ...), validated and built like written-out layers.
using LayerExpander = std::function<std::vector<YAML::Node>(const KeyValues&)>;
using KernelFactory = std::function<std::unique_ptr<LayerKernel>(const Layer&, const KernelContext&)>;

// What a backend's kernel for a layer type can take besides plain f32 activations (bits).
enum KernelCaps : unsigned {
  // Takes its input in any layout that the previous kernel prefers (KernelContext::input_layout);
  // without it the input is plain. A kernel of several inputs takes each in its own layout
  // (KernelContext::input_layouts).
  kAnyInputLayout = 1u,
  // Runs with its activations in the backend's low-precision dtype (KernelContext::act_dtype);
  // without it the executor converts to f32 around the kernel.
  kLowPrecisionActivations = 2u,
  // With kLowPrecisionActivations: runs in low precision only when its inputs arrive in it (cheap
  // memory-bound layers: activations, batchnorm, pooling, add follow the layer before them rather
  // than cost two conversions around themselves).
  kFollowsInputDtype = 4u,
  // With kLowPrecisionActivations: runs in low precision only when its output channels (the first
  // dimension of a sample's output) are a multiple of 8. Tensor-core kernels pad other channel
  // counts in extra passes over the tensors (cuDNN's nhwcAddPadding) and the channels-last edges
  // around them cost more than 16-bit arithmetic saves; such a layer stays f32 in NCHW.
  kLowPrecisionChannelsOf8 = 8u,
  // Can apply a relu to its output itself (KernelContext::fused_relu): the executor then runs a
  // relu layer that is the only consumer of this layer's output inside this kernel (batchnorm).
  kFusesRelu = 16u,
  // Can leave its bias out for a batchnorm after it to take (KernelContext::bias_to_batchnorm).
  kBiasToBatchnorm = 32u,
  // A batchnorm that can take the bias of the layer before it (KernelContext::takes_bias).
  kTakesBias = 64u,
  // The layouts it prefers for its output hold the plain tensor's elements permuted, without
  // padding (channels-last), so gradients in them add element-wise: its output may then keep
  // that layout when it goes to several layers, or to a layer of several inputs (add), as long as
  // all of them take any layout. Without it (oneDNN's blocked layouts pad the channels) only a
  // sole consumer of one input does.
  kDenseLayout = 128u,
  // With kLowPrecisionActivations: a memory-bound kernel (a few operations an element: layer_norm,
  // position_embedding), which 16 bits speed up at any size, so low_precision_min_mflops does not
  // keep it in f32 as it keeps small convolutions and dense layers.
  kMemoryBound = 256u,
  // Can apply GELU's tanh form to its output itself (KernelContext::fused_gelu), as kFusesRelu
  // a relu: a gelu layer with `approximate: tanh` that alone reads this layer's output.
  kFusesGeluTanh = 512u,
  // Can take over the backward of a fused gelu before it (KernelContext::gelu_from_input).
  kTakesGeluGrad = 1024u,
  // Its backward writes an input's gradient as a copy of its output's (add, where it writes
  // rather than adds into it): the executor may give an input that this layer alone reads that
  // gradient's memory, and backward then skips the copy (the input gradient's pointer is dy's).
  kCopiesOutputGradient = 2048u,
  // Its forward may be done by the layer right after it (KernelContext::add_to_next: add).
  kHandsOverForward = 4096u,
  // Can compute the add before it (two inputs) as it reads them (KernelContext::add_from_input).
  kTakesAddForward = 8192u,
  // Its normalize pass may be done by the layer that alone reads its output
  // (KernelContext::normalize_to_next: batchnorm).
  kHandsOverNormalize = 16384u,
  // Can apply the batchnorm before it as it reads its input (KernelContext::normalize_from_input).
  kTakesNormalize = 32768u,
};

// What a layer type is besides its keys.
struct LayerTraits {
  // Takes Keras' `activation:` shortcut: a separate activation layer is added after it (the
  // key is declared for it: linear or any type registered with `activation`).
  bool activation_shortcut = false;
  // Is an element-wise or row-wise activation, usable in the `activation:` shortcut.
  bool activation = false;
};

struct LayerEntry {
  std::string type;
  std::string doc;  // one line: what the layer computes (trainer help layers, docs/config.md)
  KeySpecs keys;    // every key but `type` and `name`, `activation` included when it takes the shortcut
  LayerTraits traits;
  LayerFactory make;     // null for a macro
  LayerExpander expand;  // non-null for a macro (mlp), which never becomes a Layer itself
  std::map<std::string, KernelFactory> kernels;  // backend name ("cpu", "cuda") -> factory
  std::map<std::string, unsigned> caps;          // backend name -> KernelCaps of its kernel

  // Validates r's mapping against `keys` (an undeclared key is an error; the common keys, type,
  // name and inputs, are known: the model reads them) and returns the values.
  KeyValues read(NodeReader& r) const;
  // read() and make(); throws InternalError for a macro.
  std::unique_ptr<Layer> make_layer(NodeReader& r) const;
};

class Registry {
 public:
  // The process-wide registry, filled on first use with every built-in layer; the kernels join
  // it through register_backends() (kernels/register_backends.h).
  static Registry& global();

  // `doc`: one line saying what the layer computes.
  void add_layer(const std::string& type, std::string doc, KeySpecs keys, LayerFactory make,
                 LayerTraits traits = {});
  void add_macro(const std::string& type, std::string doc, KeySpecs keys, LayerExpander expand);
  void add_kernel(const std::string& type, const std::string& backend, KernelFactory make, unsigned caps = 0);
  // The KernelCaps of the backend's kernel for the type (0: none, or no kernel).
  unsigned kernel_caps(const std::string& type, const std::string& backend) const;
  bool accepts_any_input_layout(const std::string& type, const std::string& backend) const {
    return kernel_caps(type, backend) & kAnyInputLayout;
  }
  bool takes_low_precision(const std::string& type, const std::string& backend) const {
    return kernel_caps(type, backend) & kLowPrecisionActivations;
  }

  // Throws ConfigError "unknown layer type 'x' (did you mean 'y'?); registered types: ...".
  const LayerEntry& layer(const std::string& type, const std::string& where) const;
  std::vector<std::string> layer_types() const;
  bool has_layer(const std::string& type) const { return layers_.count(type) > 0; }
  // The types registered as activations, in registration order.
  const std::vector<std::string>& activation_types() const { return activations_; }
  std::unique_ptr<LayerKernel> make_kernel(const std::string& backend, const Layer& layer,
                                           const KernelContext& ctx) const;

 private:
  std::map<std::string, LayerEntry> layers_;
  std::vector<std::string> activations_;
};

// The keys every item of model.layers takes besides its type's own: type, name and inputs
// (lib/model/layer_list.h reads them).
const KeySpecs& common_layer_keys();

// Defined in lib/layers/register_layers.cc. The kernels of each backend are added by
// register_backends() (kernels/register_backends.h), which names the backends.
void register_builtin_layers(Registry& r);

}  // namespace trainer
