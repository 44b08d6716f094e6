// The one registration call: every backend this build has, each with its layer kernels.
#pragma once

namespace trainer {

class BackendRegistry;
class Registry;

// Adds the CPU backend ("cpu") and its kernels, and in a build with CUDA the CUDA backend
// ("cuda") and its kernels. Call it once, before anything creates a backend or plans a step:
// cmd/main.cc, tests/main.cc and tests/gpu/gpu_main.cc do, with the two global registries.
void register_backends(BackendRegistry& backends, Registry& layers);

}  // namespace trainer
