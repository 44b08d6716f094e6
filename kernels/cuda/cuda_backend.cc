// CudaBackend: device, stream, library handles, allocator and the non-layer ops (see the header).
#include "kernels/cuda/cuda_backend.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <nvtx3/nvToolsExt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cuda/arch_probe.cuh"
#include "kernels/cuda/channels_last.h"
#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/unpack_upload.cuh"
#include "lib/core/elapsed.h"
#ifdef TRAINER_LAZY_CUBLAS
#include "kernels/cuda/cublas_lazy.h"
#endif
#ifdef TRAINER_HAVE_NCCL
#include "kernels/cuda/nccl_collective.h"
#endif

namespace trainer {

namespace {

// cuBLAS wants a workspace of its own; ours comes from the allocator so it counts against the
// cap: 32 MiB (what cuBLAS recommends on Hopper), at most an eighth of a cap.
size_t cublas_workspace_size(size_t cap) {
  const size_t want = size_t(32) << 20;
  if (!cap) return want;
  return std::min(want, cap / 8 / kArenaAlign * kArenaAlign);
}

// Start-up work of the libraries that needs nothing from the plan, done on a thread of its own
// while the constructor creates the context and the executor plans (2026-11-30, H200: a cold
// resnet18_cifar start spent ~40 ms in cuDNN's first calls loading its sub-libraries, and its first
// cuBLASLt heuristic query took ~80 ms, each on the planning thread).
//  - With TRAINER_LAZY_CUBLAS, cuBLAS and cuBLASLt (opened at their first call, cublas_lazy.cc:
//    130 ms of static initializers) are opened here, while the context is created.
//  - cuDNN 9 opens its sub-libraries (graph, ops, heuristics, convolutions, precompiled engines)
//    at their first use. Opening them here, from the directory libcudnn itself came from, needs no
//    context and overlaps its creation; cuDNN's own dlopen then finds them loaded (by soname).
//  - cuBLASLt's first heuristic query sets up tables shared by every handle of the process; asked
//    once here, on a handle of this thread's own, the plan's first query is as fast as the rest.
// Nothing here touches a stream or the allocator, and every failure only leaves the work to the
// first real call.
void warm_libraries(int device) {
  auto t0 = std::chrono::steady_clock::now();
  std::string blas;  // "cuBLAS opened in N ms, " where this thread opens it
#ifdef TRAINER_LAZY_CUBLAS
  cuda::preload_cublas();
  blas = fmt::format("cuBLAS opened in {:.0f} ms, ", ms_since(t0));
#endif
  t0 = std::chrono::steady_clock::now();
  static std::once_flag opened;
  std::call_once(opened, [] {
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(&cudnnCreate), &info) || !info.dli_fname) return;
    std::string dir = info.dli_fname;
    dir = dir.find('/') == std::string::npos ? std::string() : dir.substr(0, dir.rfind('/') + 1);
    const std::string major = std::to_string(CUDNN_MAJOR);
    for (const char* lib : {"libcudnn_graph", "libcudnn_ops", "libcudnn_heuristic", "libcudnn_cnn",
                            "libcudnn_engines_precompiled"})
      (void)dlopen((dir + lib + ".so." + major).c_str(), RTLD_LAZY | RTLD_LOCAL);  // kept for the process
  });
  const double dl_ms = ms_since(t0);
  const auto t1 = std::chrono::steady_clock::now();
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  if (cudaSetDevice(device) == cudaSuccess && cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 64, 64, 64) == CUBLAS_STATUS_SUCCESS &&
      cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS) {
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    (void)cublasLtMatmulAlgoGetHeuristic(lt, desc, layout, layout, layout, layout, pref, 1, &result, &found);
  }
  if (pref) cublasLtMatmulPreferenceDestroy(pref);
  if (layout) cublasLtMatrixLayoutDestroy(layout);
  if (desc) cublasLtMatmulDescDestroy(desc);
  if (lt) cublasLtDestroy(lt);
  (void)cudaGetLastError();
  spdlog::debug(
      "GPU {}: {}cuDNN's libraries opened in {:.0f} ms, cuBLASLt's heuristics ready in {:.0f} ms, "
      "beside the start",
      device, blas, dl_ms, ms_since(t1));
}

std::string version_pair(int v) {  // 13000 -> "13.0"
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace

void* CudaHeap::raw_alloc(size_t bytes) {
  CUDA_CHECK(cudaSetDevice(device_));
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    return nullptr;
  }
  CUDA_CHECK(e);
  return p;
}

void CudaHeap::raw_free(void* p) {
  if (!p) return;
  // Called from destructors: nothing to report to. The pointer's device first: pipeline stages
  // on several GPUs are destroyed from one thread.
  (void)cudaSetDevice(device_);
  cudaFree(p);
}

std::string CudaHeap::detail() const {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    (void)cudaGetLastError();
    return "";
  }
  return "the device reports " + format_bytes(free_b) + " free of " + format_bytes(total_b);
}

CudaBackend::CudaBackend(int device, const DeviceRequest& req)
    : device_(device), math_(req.math), deterministic_(req.deterministic) {
  try {
    // Start-up costs, at debug level: each is paid once a process, before the plan.
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    warm_up_ = std::thread(warm_libraries, device_);
    CUDA_CHECK(cudaSetDevice(device_));
    CUDA_CHECK(cudaGetDeviceProperties(&prop_, device_));
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    const double context_ms = ms_since(t0);
    auto t = Clock::now();
    CUDNN_CHECK(cudnnCreate(&cudnn_));
    CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));
    const double cudnn_ms = ms_since(t);
    t = Clock::now();
    CUBLAS_CHECK(cublasCreate(&cublas_));
    CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
    CUBLAS_CHECK(cublasSetPointerMode(cublas_, CUBLAS_POINTER_MODE_HOST));
    CUBLAS_CHECK(cublasLtCreate(&cublas_lt_));
    spdlog::debug(
        "GPU {}: CUDA context and stream {:.0f} ms, cuDNN handle {:.0f} ms, cuBLAS handles {:.0f} ms",
        device_, context_ms, cudnn_ms, ms_since(t));
    CUBLAS_CHECK(cublasSetMathMode(
        cublas_, math_ == MathMode::tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
    heap_ = std::make_unique<CudaHeap>(device_);
    alloc_ = std::make_unique<CappedDeviceAllocator>(*heap_, req.mem_limit_bytes, req.mem_growth);
    cublas_workspace_bytes_ = cublas_workspace_size(req.mem_limit_bytes);
    if (cublas_workspace_bytes_)
      cublas_workspace_ = alloc_->allocate(cublas_workspace_bytes_, "the cuBLAS workspace");
    CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_, cublas_workspace_bytes_));
    staging_ = std::make_unique<cuda::StagingRing>(stream_);
    CUDA_CHECK(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&landing_free_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&landing_full_, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&handoff_, cudaEventDisableTiming));
  } catch (...) {
    release();
    throw;
  }
}

CudaBackend::~CudaBackend() { release(); }

void CudaBackend::release() noexcept {
  if (warm_up_.joinable()) warm_up_.join();
  destroy_graphs();
  graphs_.clear();
  if (handoff_) cudaEventDestroy(handoff_);
  handoff_ = nullptr;
  staging_.reset();  // waits for its copies, on both streams
  if (landing_full_) cudaEventDestroy(landing_full_);
  if (landing_free_) cudaEventDestroy(landing_free_);
  landing_full_ = landing_free_ = nullptr;
  if (copy_stream_) cudaStreamDestroy(copy_stream_);
  copy_stream_ = nullptr;
  if (cublas_lt_) cublasLtDestroy(cublas_lt_);
  cublas_lt_ = nullptr;
  if (cublas_) cublasDestroy(cublas_);
  if (cudnn_) cudnnDestroy(cudnn_);
  cublas_ = nullptr;
  cudnn_ = nullptr;
  if (alloc_ && cublas_workspace_) alloc_->deallocate(cublas_workspace_);
  cublas_workspace_ = nullptr;
  alloc_.reset();  // returns every chunk; allocations still held by others are lost with it
  heap_.reset();
  if (stream_) cudaStreamDestroy(stream_);
  stream_ = nullptr;
}

std::string CudaBackend::description() const {
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.1f GiB", double(prop_.totalGlobalMem) / double(1 << 30));
  std::string s = "GPU " + std::to_string(device_) + ": " + prop_.name + " (compute capability " +
                  std::to_string(prop_.major) + "." + std::to_string(prop_.minor) + ", " + gib + "; " +
                  cuda_version_string() + "; " +
                  (math_ == MathMode::strict_fp32 ? std::string("strict fp32") : math_name(math_));
  if (deterministic_) s += ", deterministic";
  if (alloc_->cap_bytes()) s += ", cap " + format_bytes(alloc_->cap_bytes());
  if (alloc_->growth()) s += ", memory growth";
  return s + ")";
}

void CudaBackend::copy_to_device(void* dst, const void* src, size_t bytes) {
  staging_->copy_to_device(dst, src, bytes);
}

// Two uploads of `bytes` in flight at once (the step's, and the next one's, packed while the step
// runs) and room for the small copies between them. Without it a batch over half the ring (32 MiB:
// resnet18 at 224 x 224 uploads 154 MB of floats at batch 256) went as a synchronous copy, and the
// GPU waited for it every step.
void CudaBackend::reserve_uploads(size_t bytes) { staging_->grow(2 * align_up(bytes) + (size_t(1) << 20)); }

// A step's inputs through the landing zone: the copy engine fills it on copy_stream_ as soon as the
// step before has moved its own pieces out (landing_free_, recorded after that step's unpack),
// so the transfer runs beside that step's kernels instead of between two steps (cifar10_cnn's
// 3 MB batch of 256 rows: ~60 us of PCIe a step that the GPU otherwise sat out); stream_ waits
// for it to land, and one kernel moves the pieces to their places.
void CudaBackend::upload_inputs(const UploadPiece* pieces, int n, void* landing) {
  if (!landing || n > cuda::kMaxUnpackPieces) {
    Backend::upload_inputs(pieces, n, landing);
    return;
  }
  cuda::UnpackPieces unpack;
  const size_t total = landing_bytes(pieces, n, unpack.offset);
  if (!staging_->fits(total)) {
    Backend::upload_inputs(pieces, n, landing);
    return;
  }
  unpack.n = n;
  for (int i = 0; i < n; ++i) {
    unpack.dst[i] = pieces[i].dst;
    unpack.bytes[i] = pieces[i].bytes;
  }
  CUDA_CHECK(cudaStreamWaitEvent(copy_stream_, landing_free_, 0));
  staging_->copy_packed(landing, pieces, unpack.offset, n, total, copy_stream_);
  CUDA_CHECK(cudaEventRecord(landing_full_, copy_stream_));
  CUDA_CHECK(cudaStreamWaitEvent(stream_, landing_full_, 0));
  cuda::launch_unpack_upload(landing, unpack, stream_);
  CUDA_CHECK(cudaEventRecord(landing_free_, stream_));
}

void CudaBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
  CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaBackend::zero(void* dst, size_t bytes) {
  if (bytes) CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream_));
}

void CudaBackend::convert_filter_krsc(void* dst, DType t, const float* src, const LowFilterLayout& f) {
  cuda::launch_filter_to_krsc(src, t, dst, f.k, f.c, f.c, f.r, f.s, stream_);
}

void CudaBackend::convert(void* dst, DType dst_type, const void* src, DType src_type, int64_t n,
                          bool accumulate) {
  cuda::launch_convert(dst, dst_type, src, src_type, n, accumulate, stream_);
}

void CudaBackend::synchronize() { CUDA_CHECK(cudaStreamSynchronize(stream_)); }

void CudaBackend::make_current() { CUDA_CHECK(cudaSetDevice(device_)); }

void CudaBackend::wait_for(Backend& other) {
  auto* o = dynamic_cast<CudaBackend*>(&other);
  if (!o) {
    Backend::wait_for(other);
    return;
  }
  if (o == this) return;
  // The event's state at this call is what the wait takes: recording it again later (the next
  // handoff) does not affect this wait.
  CUDA_CHECK(cudaEventRecord(o->handoff_, o->stream_));
  CUDA_CHECK(cudaStreamWaitEvent(stream_, o->handoff_, 0));
}

void CudaBackend::copy_from(Backend& from, void* dst, const void* src, size_t bytes) {
  auto* o = dynamic_cast<CudaBackend*>(&from);
  if (!o) {
    Backend::copy_from(from, dst, src, bytes);  // throws: one of them is not a GPU
    return;
  }
  if (bytes == 0) return;
  if (o->device_ == device_) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
    return;
  }
  if (std::find(peers_.begin(), peers_.end(), o->device_) == peers_.end()) {
    peers_.push_back(o->device_);
    int can = 0;
    CUDA_CHECK(cudaDeviceCanAccessPeer(&can, device_, o->device_));
    if (can) {
      CUDA_CHECK(cudaSetDevice(device_));
      const cudaError_t e = cudaDeviceEnablePeerAccess(o->device_, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled)
        (void)cudaGetLastError();  // another backend on this GPU enabled it
      else
        CUDA_CHECK(e);
    }
  }
  CUDA_CHECK(cudaMemcpyPeerAsync(dst, device_, src, o->device_, bytes, stream_));
}

// A step is recorded on our one stream in thread-local mode: only this thread's work on this
// stream is captured, and any forbidden call inside (a sync, an allocation) fails the capture
// instead of silently running.
void CudaBackend::begin_capture() {
  CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
}

namespace {

// At debug level: what a captured step holds (its nodes by kind, and how many of its edges let the
// next kernel start before the one before it has finished: programmatic dependent launches).
void describe_graph(cudaGraph_t graph, size_t index) {
  if (!spdlog::should_log(spdlog::level::debug)) return;
  size_t n_nodes = 0, n_edges = 0;
  if (cudaGraphGetNodes(graph, nullptr, &n_nodes) != cudaSuccess ||
      cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &n_edges) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  std::vector<cudaGraphNode_t> nodes(n_nodes), from(n_edges), to(n_edges);
  std::vector<cudaGraphEdgeData> data(n_edges);
  if (cudaGraphGetNodes(graph, nodes.data(), &n_nodes) != cudaSuccess ||
      cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &n_edges) != cudaSuccess) {
    (void)cudaGetLastError();
    return;
  }
  size_t kernels = 0, copies = 0, other = 0, programmatic = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType t{};
    if (cudaGraphNodeGetType(node, &t) != cudaSuccess) continue;
    if (t == cudaGraphNodeTypeKernel)
      ++kernels;
    else if (t == cudaGraphNodeTypeMemcpy || t == cudaGraphNodeTypeMemset)
      ++copies;
    else
      ++other;
  }
  for (const cudaGraphEdgeData& e : data) programmatic += e.type == cudaGraphDependencyTypeProgrammatic;
  spdlog::debug("graph {}: {} kernels, {} copies and sets, {} other nodes; {} edges, {} programmatic", index,
                kernels, copies, other, n_edges, programmatic);
}

}  // namespace

int CudaBackend::end_capture() {
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  describe_graph(graph, graphs_.size());
  cudaGraphExec_t exec = nullptr;
  cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  CUDA_CHECK(err);
  graphs_.push_back(exec);
  return int(graphs_.size()) - 1;
}

void CudaBackend::abort_capture() noexcept {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream_, &status) == cudaSuccess && status != cudaStreamCaptureStatusNone) {
    cudaGraph_t graph = nullptr;
    cudaStreamEndCapture(stream_, &graph);
    if (graph) cudaGraphDestroy(graph);
  }
  cudaGetLastError();  // clear the sticky-free error the failed capture left
}

void CudaBackend::destroy_graphs() noexcept {
  if (stream_) cudaStreamSynchronize(stream_);
  for (cudaGraphExec_t& g : graphs_) {
    if (g) cudaGraphExecDestroy(g);
    g = nullptr;  // the index stays taken: an executor's plan may still name it
  }
}

void CudaBackend::replay(int graph) {
  if (graph < 0 || graph >= int(graphs_.size())) throw InternalError("replay of an unknown step graph");
  if (!graphs_[size_t(graph)])
    throw InternalError("replay of a step graph destroyed with its collective (CudaBackend::destroy_graphs)");
  CUDA_CHECK(cudaGraphLaunch(graphs_[size_t(graph)], stream_));
}

CudaBackend& cuda_of(const KernelContext& ctx) {
  auto* b = dynamic_cast<CudaBackend*>(ctx.backend);
  if (!b) throw InternalError("a CUDA kernel was created for a non-CUDA backend");
  return *b;
}

std::vector<GpuInfo> cuda_list_gpus(std::string* why_none) {
  std::vector<GpuInfo> gpus;
  try {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      if (why_none) {
        int runtime = 0, driver = 0;
        (void)cudaRuntimeGetVersion(&runtime);
        (void)cudaDriverGetVersion(&driver);
        (void)cudaGetLastError();
        if (e == cudaErrorInsufficientDriver && driver > 0)
          *why_none = "the NVIDIA driver supports CUDA " + version_pair(driver) +
                      ", older than this build's CUDA runtime " + version_pair(runtime) +
                      "; update the driver, or use --device cpu";
        else if (e == cudaErrorInsufficientDriver)
          *why_none = "no NVIDIA driver was found (this build's CUDA runtime is " + version_pair(runtime) +
                      "); install one, or use --device cpu";
        else if (e == cudaErrorNoDevice)
          *why_none = "the NVIDIA driver sees no GPU (" + cuda::cuda_error_text(e) + ")";
        else
          *why_none = "CUDA: " + cuda::cuda_error_text(e);
      }
      return {};
    }
    if (count == 0) {
      if (why_none) *why_none = "CUDA reports no GPU";
      return {};
    }
    int current = 0;
    (void)cudaGetDevice(&current);
    for (int i = 0; i < count; ++i) {
      cudaDeviceProp p{};
      if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
        (void)cudaGetLastError();
        continue;
      }
      GpuInfo g;
      g.index = i;
      g.name = p.name;
      g.cc_major = p.major;
      g.cc_minor = p.minor;
      g.total_bytes = p.totalGlobalMem;
      g.free_bytes = 0;
      g.problem = cuda::arch_problem(i, g.name, g.cc_major, g.cc_minor);
      // Free memory needs the device's context (created here once, kept by the runtime).
      if (cudaSetDevice(i) == cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) g.free_bytes = free_b;
      }
      (void)cudaGetLastError();
      gpus.push_back(g);
    }
    (void)cudaSetDevice(current);
    (void)cudaGetLastError();
    if (gpus.empty() && why_none) *why_none = "no GPU could be queried";
  } catch (const std::exception& ex) {
    if (why_none) *why_none = ex.what();
    return {};
  }
  return gpus;
}

std::string cuda_version_string() {
  int driver = 0, runtime = 0;
  if (cudaDriverGetVersion(&driver) != cudaSuccess) (void)cudaGetLastError();
  if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) (void)cudaGetLastError();
  const size_t dnn = cudnnGetVersion();  // 91900 -> 9.19.0
  int bl_major = 0, bl_minor = 0, bl_patch = 0;
  cublasGetProperty(MAJOR_VERSION, &bl_major);
  cublasGetProperty(MINOR_VERSION, &bl_minor);
  cublasGetProperty(PATCH_LEVEL, &bl_patch);
  return "driver " + (driver ? version_pair(driver) : std::string("none")) + ", runtime " +
         version_pair(runtime) + ", cuDNN " + std::to_string(dnn / 10000) + "." +
         std::to_string((dnn % 10000) / 100) + "." + std::to_string(dnn % 100) + ", cuBLAS " +
         std::to_string(bl_major) + "." + std::to_string(bl_minor) + "." + std::to_string(bl_patch);
}

std::unique_ptr<Backend> create_cuda_backend(int index, const DeviceRequest& req) {
  return std::make_unique<CudaBackend>(index, req);
}

std::string CudaBackend::collectives_unavailable() const {
#ifdef TRAINER_HAVE_NCCL
  return "";
#else
  return "this build has no NCCL, which training on several GPUs needs: install NCCL (Debian: "
         "libnccl-dev) and rebuild (cmake finds nccl.h and libnccl)";
#endif
}

std::string cuda_collective_library() {
#ifdef TRAINER_HAVE_NCCL
  return nccl_library();
#else
  return "";
#endif
}

int cuda_gpu_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

std::string CudaBackend::collective_library() const { return cuda_collective_library(); }

std::vector<uint8_t> CudaBackend::make_collective_id() {
#ifdef TRAINER_HAVE_NCCL
  return nccl_unique_id();
#else
  return Backend::make_collective_id();
#endif
}

std::unique_ptr<DeviceCollective> CudaBackend::join_collective(const std::vector<uint8_t>& id, int rank,
                                                               int size) {
#ifdef TRAINER_HAVE_NCCL
  return join_nccl(*this, id, rank, size);
#else
  return Backend::join_collective(id, rank, size);
#endif
}

void CudaBackend::range_push(const char* name) { nvtxRangePushA(name); }
void CudaBackend::range_pop() { nvtxRangePop(); }

namespace {

// FLOP per clock per SM of the FP32 units and of the TF32 tensor cores (0: none, or an
// architecture not listed).
struct PerClock {
  double fp32 = 0, tf32 = 0;
};
PerClock per_sm_clock(int cc) {
  switch (cc) {
    case 75:
      return {128, 0};  // Turing: no TF32
    case 80:
      return {128, 1024};  // A100
    case 86:
    case 87:
    case 89:
      return {256, 256};  // RTX 30xx / 40xx, L4, L40
    case 90:
      return {256, 2048};  // H100, H200
    default:
      return {};
  }
}

}  // namespace

// SMs x peak clock x FLOP per clock per SM of the architecture (dense; a multiply-add is 2):
// FP32 FMA units, TF32 tensor cores with --math tf32, BF16 or FP16 tensor cores (twice TF32's
// rate) with --math bf16 or fp16. 0 for architectures not listed.
//   A100 (8.0): 108 x 1.41 GHz x 1024 = 156 TFLOP/s tf32;  H100 SXM (9.0): 132 x 1.98 GHz x
//   2048 = 535 TFLOP/s tf32 at the boost clock (NVIDIA quotes 495 at its sustained clock), 1,070
//   bf16 (NVIDIA: 989).
double CudaBackend::peak_flops() const {
  const PerClock p = per_sm_clock(prop_.major * 10 + prop_.minor);
  const double per_clock = math_ == MathMode::tf32 && p.tf32 > 0 ? p.tf32
                           : low_precision(math_) && p.tf32 > 0  ? 2 * p.tf32
                                                                 : p.fp32;
  return clocks_per_second() * per_clock;
}

double CudaBackend::fp32_core_flops() const {
  return clocks_per_second() * per_sm_clock(prop_.major * 10 + prop_.minor).fp32;
}

// SMs x the peak clock in Hz (0 where the device does not say).
double CudaBackend::clocks_per_second() const {
  int clock_khz = 0, sms = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device_) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device_) != cudaSuccess)
    return 0;
  return double(sms) * double(clock_khz) * 1e3;
}

}  // namespace trainer
