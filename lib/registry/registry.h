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
#include "lib/model/layer.h"

namespace trainer {

class NodeReader;

using LayerFactory = std::function<std::unique_ptr<Layer>(NodeReader&)>;
using KernelFactory = std::function<std::unique_ptr<LayerKernel>(const Layer&, const KernelContext&)>;

struct LayerEntry {
  std::string type;
  std::string summary;  // one line for `trainer layers` and error messages
  LayerFactory make_layer;
  std::map<std::string, KernelFactory> kernels;  // backend name ("cpu", "cuda") -> factory
  // Backends whose kernel for this type accepts its input in any layout that the previous
  // kernel prefers (KernelContext::input_layout); others get plain inputs.
  std::map<std::string, bool> any_input_layout;
};

class Registry {
 public:
  // The process-wide registry, filled on first use with every built-in layer; the kernels join
  // it through register_backends() (kernels/register_backends.h).
  static Registry& global();

  void add_layer(const std::string& type, const std::string& summary, LayerFactory make);
  void add_kernel(const std::string& type, const std::string& backend, KernelFactory make,
                  bool accepts_any_input_layout = false);
  bool accepts_any_input_layout(const std::string& type, const std::string& backend) const;

  // Throws ConfigError "unknown layer type 'x' (did you mean 'y'?); registered types: ...".
  const LayerEntry& layer(const std::string& type, const std::string& where) const;
  bool has_layer(const std::string& type) const { return layers_.count(type) != 0; }
  std::vector<std::string> layer_types() const;
  std::unique_ptr<LayerKernel> make_kernel(const std::string& backend, const Layer& layer,
                                           const KernelContext& ctx) const;

 private:
  std::map<std::string, LayerEntry> layers_;
};

// Defined in lib/layers/register_layers.cc. The kernels of each backend are added by
// register_backends() (kernels/register_backends.h), which names the backends.
void register_builtin_layers(Registry& r);

}  // namespace trainer
