#include "lib/backend/backend_registry.h"

#include "lib/backend/device_spec.h"
#include "lib/core/error.h"

namespace trainer {

BackendRegistry& BackendRegistry::global() {
  static BackendRegistry* r = new BackendRegistry;  // never destroyed: used until exit
  return *r;
}

void BackendRegistry::add(BackendEntry entry) {
  for (const BackendEntry& e : entries_)
    if (e.name == entry.name) throw InternalError("backend '" + entry.name + "' registered twice");
  if (entry.list_gpus && gpu())
    throw InternalError("a second GPU backend '" + entry.name + "' (already: " + gpu()->name + ")");
  entries_.push_back(std::move(entry));
}

std::vector<std::string> BackendRegistry::names() const {
  std::vector<std::string> v;
  for (const BackendEntry& e : entries_) v.push_back(e.name);
  return v;
}

const BackendEntry& BackendRegistry::cpu() const {
  for (const BackendEntry& e : entries_)
    if (e.name == "cpu") return e;
  throw InternalError("no 'cpu' backend is registered; call register_backends() first");
}

const BackendEntry* BackendRegistry::gpu() const {
  for (const BackendEntry& e : entries_)
    if (e.list_gpus) return &e;
  return nullptr;
}

std::vector<GpuInfo> BackendRegistry::list_gpus(std::string* why_none) const {
  if (const BackendEntry* g = gpu()) return g->list_gpus(why_none);
  if (why_none) *why_none = "this build has no CUDA backend (built without nvcc/cuDNN)";
  return {};
}

int BackendRegistry::gpu_count() const {
  const BackendEntry* g = gpu();
  return g && g->gpu_count ? g->gpu_count() : 0;
}

std::string BackendRegistry::gpu_collective_library() const {
  const BackendEntry* g = gpu();
  return g && g->collective_library ? g->collective_library() : "";
}

std::string BackendRegistry::gpu_versions() const {
  const BackendEntry* g = gpu();
  return g && g->versions ? g->versions() : "";
}

std::unique_ptr<Backend> BackendRegistry::create(const DeviceRequest& req, std::string* note) const {
  std::optional<DeviceSpec> spec = parse_device(req.device);
  if (!spec) throw UsageError("unknown device '" + req.device + "'; allowed: " + kDeviceForms);
  if (spec->kind == DeviceSpec::Kind::cpu) return cpu().make(req, 0);
  if (spec->several())
    throw UsageError("device " + req.device +
                     " names several GPUs; only trainer fit trains on several (one replica per GPU); give "
                     "one GPU: gpu:N");
  std::string why;
  std::vector<GpuInfo> gpus = list_gpus(&why);
  if (spec->kind == DeviceSpec::Kind::automatic) {
    // The first GPU this build can run on; else the CPU, saying why in one line.
    for (const auto& g : gpus)
      if (g.problem.empty()) return gpu()->make(req, g.index);
    if (!gpus.empty()) why = gpus.front().problem;
    if (note) *note = "device auto: no usable GPU (" + why + "); running on the CPU";
    return cpu().make(req, 0);
  }
  const int index = spec->index;
  if (gpus.empty()) throw RuntimeError("device " + req.device + ": no usable GPU: " + why);
  if (index >= int(gpus.size())) {
    std::string list;
    // One line, as every error (README "Exit codes"): a newline here would reach the terminal
    // escaped, as \x0a, since messages escape the control bytes of what they quote.
    for (const auto& g : gpus)
      list += (list.empty() ? "" : ", ") + ("gpu:" + std::to_string(g.index)) + " (" + g.name + ")";
    throw RuntimeError("device " + req.device + " does not exist; GPUs present: " + list);
  }
  if (!gpus[index].problem.empty()) throw RuntimeError(gpus[index].problem);
  return gpu()->make(req, index);  // gpus is not empty, so there is a GPU backend
}

}  // namespace trainer
