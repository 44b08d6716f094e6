#include "kernels/cpu/cpu_backend.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>

#include "kernels/cpu/cpu_ops.h"
#include "lib/core/usable_cores.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace trainer {

namespace {

// Threads of this process that are runnable now (state R in /proc/self/task/*/stat), the caller
// included.
int own_runnable_threads() {
  int n = 0;
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    std::ifstream f(task.path() / "stat");
    std::string line;
    if (!std::getline(f, line)) continue;
    const size_t close = line.rfind(')');  // "tid (comm) S ...": comm may hold spaces and parens
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'R') ++n;
  }
  return std::max(n, 1);
}

// Runnable threads of other processes right now: the kernel's run-queue count in /proc/loadavg
// ("0.50 0.40 0.30 3/250 1234") less this process's own runnable threads. Ours count too: an
// earlier run in the same process (the tests fit three times in one) leaves its OpenMP threads
// spinning for a while, which took them for other work and gave the next run fewer threads, and
// oneDNN's convolution gradients other bits. The least of a few samples, so that only a machine
// that stays busy counts as busy.
int other_runnable_threads() {
  int least = -1;
  for (int i = 0; i < 3; ++i) {
    std::ifstream f("/proc/loadavg");
    double l1, l5, l15;
    int running = 0;
    char slash;
    if (!(f >> l1 >> l5 >> l15 >> running >> slash)) return 0;
    const int others = running - own_runnable_threads();
    least = least < 0 ? others : std::min(least, others);
    if (i < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::max(0, least);
}

}  // namespace

// One OpenMP team size for the whole run, set on the thread that runs the step before any oneDNN
// primitive is created: oneDNN sizes its scratchpads and work splits for omp_get_max_threads()
// at creation. threads <= 0: OMP_NUM_THREADS if set, else every usable core.
CpuBackend::CpuBackend(size_t cap, int threads) : alloc_(cap) {
#ifdef _OPENMP
  if (threads <= 0) threads = std::getenv("OMP_NUM_THREADS") ? omp_get_max_threads() : usable_cores();
  omp_set_num_threads(threads);
  threads_ = omp_get_max_threads();
  // More threads than cores: every barrier waits for threads that are not running (--threads 4096
  // on 2 cores made a 0.2 s epoch take 68 s).
  if (threads_ > usable_cores())
    spdlog::warn(
        "CPU: {} threads on {} usable core{}: the threads take turns and each step waits for them; "
        "use --threads {} or fewer",
        threads_, usable_cores(), usable_cores() == 1 ? "" : "s", usable_cores());
#else
  threads_ = 1;
#endif
}

// libgomp's default wait policy spins between parallel regions, which keeps barriers cheap: with
// a short spin (GOMP_SPINCOUNT=3000), 16 threads ran 4x slower than 8. Spinning only hurts when
// the threads it waits for are not running, i.e. when other work holds some of our cores: then
// the step slows down by orders of magnitude (2 cores, 12 runnable threads: 3.3 s/step spinning
// against 0.47 s on one thread). So unless the user chose (a thread count or a wait policy), we
// take the usable cores that are not busy with other processes' runnable threads.
int CpuBackend::default_threads(std::string* note) {
  const int cores = usable_cores();
  if (std::getenv("OMP_NUM_THREADS") || std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT"))
    return 0;  // the user's OpenMP settings decide
  const int online = std::max(1, int(std::thread::hardware_concurrency()));
  // Other processes' threads spread over the whole machine; our share of them is what lands on
  // the cores we may use.
  const int busy = int(double(std::min(other_runnable_threads(), online)) * cores / online + 0.5);
  const int threads = std::max(1, cores - busy);
  if (threads < cores && note)
    *note = "CPU: " + std::to_string(cores - threads) + " of " + std::to_string(cores) +
            " usable cores are busy with other work; using " + std::to_string(threads) + " thread" +
            (threads == 1 ? "" : "s") + " (--threads to choose)";
  return threads;
}

std::string CpuBackend::onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

std::string CpuBackend::cpu_isa() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41:
      return "sse4.1";
    case dnnl::cpu_isa::avx:
      return "avx";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "generic";
  }
}

bool CpuBackend::has_bf16_instructions() {
  const auto isa = dnnl::get_effective_cpu_isa();
  return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
}

std::string CpuBackend::description() const {
  return "CPU (oneDNN " + onednn_version() + ", " + cpu_isa() + ", " + std::to_string(threads_) + " threads)";
}

void CpuBackend::copy_to_device(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuBackend::copy_to_host(void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void CpuBackend::zero(void* dst, size_t bytes) { std::memset(dst, 0, bytes); }

void CpuBackend::convert(void* dst, DType dst_type, const void* src, DType src_type, int64_t n,
                         bool accumulate) {
  cpu::convert(dst, dst_type, src, src_type, n, accumulate);
}

DnnlContext& dnnl_of(const KernelContext& ctx) {
  auto* cpu = dynamic_cast<CpuBackend*>(ctx.backend);
  if (!cpu) throw InternalError("a CPU kernel was created for a non-CPU backend");
  return cpu->dnnl();
}

}  // namespace trainer
