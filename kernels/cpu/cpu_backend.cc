#include "kernels/cpu/cpu_backend.h"

#include <cstring>
#include <thread>

#include "kernels/cpu/cpu_ops.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace trainer {

CpuBackend::CpuBackend(size_t cap) : alloc_(cap) {}

std::string CpuBackend::onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

std::string CpuBackend::cpu_isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse4.1";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    default: return "generic";
  }
}

std::string CpuBackend::description() const {
#ifdef _OPENMP
  int threads = omp_get_max_threads();
#else
  int threads = int(std::thread::hardware_concurrency());
#endif
  return "CPU (oneDNN " + onednn_version() + ", " + cpu_isa() + ", " + std::to_string(threads) +
         " threads)";
}

void CpuBackend::copy_to_device(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuBackend::copy_to_host(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuBackend::zero(void* dst, size_t bytes) { std::memset(dst, 0, bytes); }

void CpuBackend::loss(LossKind kind, const float* out, const int32_t* labels, int64_t batch,
                      int64_t classes, float* dout, float* loss_sum) {
  cpu::classification_loss(kind, out, labels, batch, classes, dout, loss_sum);
}
void CpuBackend::confusion(const float* out, const int32_t* labels, int64_t batch, int64_t classes,
                           float* m) {
  cpu::confusion_accumulate(out, labels, batch, classes, m);
}
void CpuBackend::topk_correct(const float* out, const int32_t* labels, int64_t batch,
                              int64_t classes, int64_t k, float* correct) {
  cpu::topk_correct(out, labels, batch, classes, k, correct);
}
void CpuBackend::check_finite(const float* x, int64_t n, uint32_t bit, StepScalars* s) {
  cpu::check_finite(x, n, bit, *s);
}
void CpuBackend::commit_step(const StepScalars* s, int64_t batch, float* loss_sum, NonfiniteRecord* record) {
  cpu::commit_step(*s, batch, loss_sum, *record);
}
// A step with a non-finite loss or gradient updates nothing (the CUDA kernels check the same).
void CpuBackend::sgd_step(const SgdHyper& h, float* w, const float* g, float* vel, int64_t n,
                          const StepScalars* s) {
  if (s->nonfinite & kNonfiniteSkipsUpdate) return;
  cpu::sgd_step(h, w, g, vel, n, *s);
}
void CpuBackend::adam_step(const AdamHyper& h, float* w, const float* g, float* m, float* v,
                           int64_t n, const StepScalars* s) {
  if (s->nonfinite & kNonfiniteSkipsUpdate) return;
  cpu::adam_step(h, w, g, m, v, n, *s);
}
void CpuBackend::rmsprop_step(const RmspropHyper& h, float* w, const float* g, float* sq,
                              float* buf, float* avg, int64_t n, const StepScalars* s) {
  if (s->nonfinite & kNonfiniteSkipsUpdate) return;
  cpu::rmsprop_step(h, w, g, sq, buf, avg, n, *s);
}

DnnlContext& dnnl_of(const KernelContext& ctx) {
  auto* cpu = dynamic_cast<CpuBackend*>(ctx.backend);
  if (!cpu) throw InternalError("a CPU kernel was created for a non-CPU backend");
  return cpu->dnnl();
}

}  // namespace trainer
