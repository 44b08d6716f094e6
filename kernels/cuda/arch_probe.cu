#include <cuda_runtime.h>

#include <sstream>

#include "kernels/cuda/arch_probe.cuh"

#ifndef TRAINER_CUDA_ARCHS
#define TRAINER_CUDA_ARCHS "unknown"
#endif

namespace trainer::cuda {

namespace {

__global__ void arch_probe_kernel() {}

// CUDA 13 dropped Maxwell, Pascal and Volta: Turing (7.5) is the oldest it compiles for.
constexpr int kMinMajor = 7, kMinMinor = 5;

// "75-real;90-virtual" -> "7.5, 9.0 (+ PTX 9.0 for newer GPUs)"
std::string readable(const std::string& archs) {
  std::string real, ptx, item;
  std::istringstream in(archs);
  while (std::getline(in, item, ';')) {
    std::string digits;
    for (char c : item)
      if (c >= '0' && c <= '9')
        digits += c;
      else
        break;
    if (digits.size() < 2) continue;
    const std::string cc = digits.substr(0, digits.size() - 1) + "." + digits.back();
    const bool is_virtual = item.find("-virtual") != std::string::npos;
    const bool is_real = item.find("-real") != std::string::npos;
    if (!is_virtual) real += (real.empty() ? "" : ", ") + cc;
    if (!is_real) ptx += (ptx.empty() ? "" : ", ") + cc;
  }
  std::string s = real.empty() ? std::string("no compiled GPU code") : "compute capability " + real;
  if (!ptx.empty()) s += " (+ PTX " + ptx + ", which newer GPUs compile at start-up)";
  return s;
}

}  // namespace

const char* built_architectures() { return TRAINER_CUDA_ARCHS; }

std::string arch_problem(int device, const std::string& gpu_name, int cc_major, int cc_minor) {
  cudaFuncAttributes attr{};
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&attr, arch_probe_kernel);
  (void)cudaGetLastError();  // leave no sticky error for the next call to report
  if (e == cudaSuccess) return "";

  const std::string cc = std::to_string(cc_major) + "." + std::to_string(cc_minor);
  std::ostringstream m;
  m << "GPU " << device << " (" << gpu_name << ", compute capability " << cc
    << ") cannot run this build of trainer, which has " << readable(built_architectures())
    << ". CUDA 13 supports compute capability " << kMinMajor << "." << kMinMinor << " and newer. ";
  const bool supported = cc_major > kMinMajor || (cc_major == kMinMajor && cc_minor >= kMinMinor);
  if (supported)
    m << "Use --device cpu, or rebuild for this GPU: cmake -DCMAKE_CUDA_ARCHITECTURES=" << cc_major
      << cc_minor << "-real ... (see docs/install.md, Building for your GPU)";
  else
    m << "This GPU needs a build with an older CUDA toolkit; use --device cpu";
  return m.str();
}

}  // namespace trainer::cuda
