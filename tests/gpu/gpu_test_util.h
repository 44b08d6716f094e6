// Helpers for the GPU tests: the two backends under comparison, layers and optimizers from YAML
// snippets and seeded random data (the CPU tests' helpers), backend buffers, and the relative error used by
// every bound:
//   rel(a, ref) = ||a - ref||_2 / ||ref||_2   (||a||_2 when ref is all zeros)
#pragma once

#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"
#include "lib/backend/backend_registry.h"
#include "lib/backend/step_kernels.h"
#include "lib/core/rng.h"
#include "lib/keys/node_reader.h"
#include "lib/optim/optimizer.h"
#include "lib/registry/layer.h"
#include "lib/registry/registry.h"
#include "tests/optimizer_rows.h"
#include "tests/test_util.h"

namespace trainer::gpu_test {

// One backend of each kind for the whole run (strict fp32, deterministic cuDNN algorithms).
// Deliberately never destroyed: library handles must not outlive the CUDA runtime at exit.
inline CpuBackend& cpu_backend() {
  static CpuBackend* b = new CpuBackend();
  return *b;
}
inline CudaBackend& cuda_backend() {
  static CudaBackend* b = [] {
    DeviceRequest req;
    req.device = "gpu:0";
    req.deterministic = true;
    return new CudaBackend(0, req);
  }();
  return *b;
}

// Whether the test GPU computes in math mode m; when not, prints the SKIPPED line that ctest and
// readers see, and the caller returns.
// Whether this machine has 2 GPUs for a [2gpu] case; otherwise prints its SKIPPED line.
inline bool have_two_gpus() {
  std::string why;
  const size_t n = BackendRegistry::global().list_gpus(&why).size();
  if (n >= 2) return true;
  std::cout << "SKIPPED: needs 2 GPUs, this machine has " << n << "\n";
  return false;
}

inline bool gpu_has_math(MathMode m) {
  if (cuda_backend().supports_math(m)) return true;
  std::cout << "SKIPPED: " << cuda_backend().description() << " has no " << math_name(m) << " tensor cores\n";
  return false;
}

// Layers, optimizers and random data as the CPU tests make them (tests/test_util.h,
// tests/optimizer_rows.h): one copy of each helper.
using test::make_layer;
using test::random_vector;
inline OptimizerConfig make_optimizer(const std::string& yaml) { return optim_tests::optimizer_from(yaml); }

inline double rel_error(const std::vector<float>& a, const std::vector<float>& ref) {
  REQUIRE(a.size() == ref.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    norm += double(ref[i]) * ref[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

// Backend memory holding `bytes`, freed with the object.
class Buffer {
 public:
  Buffer(Backend& be, size_t bytes, const std::string& what = "test buffer")
      : be_(be), bytes_(bytes), p_(be.allocator().allocate(bytes ? bytes : 1, what)) {}
  ~Buffer() { be_.allocator().deallocate(p_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  template <class T = float>
  T* as() const {
    return static_cast<T*>(p_);
  }
  void* get() const { return p_; }
  template <class T>
  void upload(const std::vector<T>& v) {
    REQUIRE(v.size() * sizeof(T) <= bytes_);
    be_.copy_to_device(p_, v.data(), v.size() * sizeof(T));
  }
  template <class T = float>
  std::vector<T> download(size_t n) const {
    std::vector<T> v(n);
    be_.copy_to_host(v.data(), p_, n * sizeof(T));
    return v;
  }
  void fill(float value, size_t n) { upload(std::vector<float>(n, value)); }

 private:
  Backend& be_;
  size_t bytes_;
  void* p_;
};

}  // namespace trainer::gpu_test
