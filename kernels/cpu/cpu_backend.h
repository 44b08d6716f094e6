// The CPU backend: host memory, oneDNN primitives for layers, hand loops for the rest.
#pragma once

#include <memory>

#include "kernels/cpu/dnnl_context.h"
#include "lib/backend/backend.h"
#include "lib/memory/host_allocator.h"

namespace trainer {

class CpuBackend : public Backend {
 public:
  // threads: 0 = OMP_NUM_THREADS when the user set it, else every core this process may use.
  explicit CpuBackend(size_t mem_cap_bytes = 0, int threads = 0);
  std::string name() const override { return "cpu"; }
  std::string description() const override;
  Allocator& allocator() override { return alloc_; }
  DnnlContext& dnnl() { return dnnl_; }

  void copy_to_device(void* dst, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  void zero(void* dst, size_t bytes) override;
  void convert(void* dst, DType dst_type, const void* src, DType src_type, int64_t n,
               bool accumulate) override;
  bool host_memory() const override { return true; }
  // bf16 where the CPU has bf16 instructions (AVX-512 BF16, AMX); tf32 is a GPU mode (a no-op here).
  // fp16 is a GPU mode here: oneDNN 2.6 computes f16 only with AVX-512 FP16, and the CPU kernels
  // are not written for it.
  bool supports_math(MathMode m) const override {
    return m == MathMode::bf16 ? has_bf16_instructions() : m != MathMode::fp16;
  }
  static bool has_bf16_instructions();
  void synchronize() override { dnnl_.stream.wait(); }

  // "oneDNN 2.6.3 (cpu isa: avx2)", for `trainer devices`.
  static std::string onednn_version();
  static std::string cpu_isa();
  // The thread count for a run that names none: the usable cores not busy with other processes'
  // runnable threads; 0 when OMP_NUM_THREADS, OMP_WAIT_POLICY or GOMP_SPINCOUNT is set (the
  // user's OpenMP settings decide). *note gets a line to log when that is fewer than all cores.
  static int default_threads(std::string* note);
  int host_threads() const override { return threads_; }

 private:
  HostAllocator alloc_;
  DnnlContext dnnl_;
  int threads_ = 1;
};

// The oneDNN context of a kernel's backend (the CPU kernels are only created for a CpuBackend).
DnnlContext& dnnl_of(const KernelContext& ctx);

}  // namespace trainer
