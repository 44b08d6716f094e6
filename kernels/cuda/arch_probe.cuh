// Whether this binary has code the chosen GPU can run, asked before any real kernel launches.
//
// Without the check, a GPU older than every compiled architecture (a T4 under an sm_80-only
// build, say) fails at the first launch with "no kernel image is available for execution on the
// device". We ask the runtime whether an empty kernel has an image for the device instead: it
// answers for SASS and for PTX the driver can JIT-compile alike, so it is the rule the real
// kernels will meet, and says it before anything was enqueued.
#pragma once

#include <string>

namespace trainer::cuda {

// The architectures this build compiled, as CMake was given them ("75-real;...;90-virtual").
const char* built_architectures();

// Empty when the device can run this build; otherwise one message for the user: the GPU, its
// compute capability, what this build has, the minimum CUDA 13 supports, and the ways out.
std::string arch_problem(int device, const std::string& gpu_name, int cc_major, int cc_minor);

}  // namespace trainer::cuda
