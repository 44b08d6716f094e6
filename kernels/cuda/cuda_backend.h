// The CUDA backend: one GPU, one non-blocking stream, cuDNN and cuBLAS bound to that stream, and
// every byte of device memory from a CappedDeviceAllocator over cudaMalloc (--mem-limit,
// --mem-growth), the cuBLAS workspace included.
//
// Ops (the non-finite guard, loss scaling, clipping) are hand-written kernels, one per kernels/cuda/<op>.cu,
// launched on the stream; they read per-step scalars (lr, step, seed) from device memory so a
// whole step can later be captured as a CUDA graph. Nothing in an op allocates, creates a
// descriptor or waits for the device; only copy_to_host() and synchronize() wait.
// Host-to-device copies go through a pinned staging ring (kernels/cuda/staging_ring.h).
// Math: strict fp32 (default) keeps tensor cores off (cuBLAS default math, cuDNN FMA math); tf32
// allows TF32 tensor cores in both.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cuda/staging_ring.h"
#include "lib/backend/backend.h"
#include "lib/backend/backend_registry.h"
#include "lib/memory/device_allocator.h"

namespace trainer {

// cudaMalloc/cudaFree on one device; reports the device's free memory when it runs out.
class CudaHeap : public DeviceHeap {
 public:
  explicit CudaHeap(int device) : device_(device) {}
  void* raw_alloc(size_t bytes) override;
  void raw_free(void* p) override;
  std::string name() const override { return "gpu:" + std::to_string(device_); }
  std::string detail() const override;

 private:
  int device_;
};

class CudaBackend : public Backend {
 public:
  CudaBackend(int device, const DeviceRequest& req);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  std::string description() const override;
  Allocator& allocator() override { return *alloc_; }

  void copy_to_device(void* dst, const void* src, size_t bytes) override;
  bool stages_uploads() const override { return true; }
  void reserve_uploads(size_t bytes) override;
  void upload_inputs(const UploadPiece* pieces, int n, void* landing) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  void zero(void* dst, size_t bytes) override;
  void convert_filter_krsc(void* dst, DType t, const float* src, const LowFilterLayout& f) override;
  void convert(void* dst, DType dst_type, const void* src, DType src_type, int64_t n,
               bool accumulate) override;
  void synchronize() override;

  bool supports_capture() const override { return true; }
  // bf16 needs BF16 tensor cores (compute capability 8.0, Ampere, or later).
  // fp16 needs FP16 tensor cores (7.0, Volta, or later).
  bool supports_math(MathMode m) const override {
    return m == MathMode::bf16 ? prop_.major >= 8 : m == MathMode::fp16 ? prop_.major >= 7 : true;
  }
  // bf16: activations and their gradients are stored in bf16 (kernels registered with
  // kLowPrecisionActivations; the executor converts around the others).
  DType activation_dtype(MathMode m) const override {
    return m == MathMode::bf16 ? DType::bf16 : m == MathMode::fp16 ? DType::f16 : DType::f32;
  }
  void begin_capture() override;
  int end_capture() override;
  void abort_capture() noexcept override;
  void replay(int graph) override;
  // Device collectives over NCCL (kernels/cuda/nccl_collective.h) in a build with NCCL.
  std::string collectives_unavailable() const override;
  std::string collective_library() const override;
  std::vector<uint8_t> make_collective_id() override;
  std::unique_ptr<DeviceCollective> join_collective(const std::vector<uint8_t>& id, int rank,
                                                    int size) override;
  void range_push(const char* name) override;
  void range_pop() override;
  // Pipeline stages (lib/model/pipeline.h): cudaSetDevice; an event on the other backend's
  // stream waited for by this one; cudaMemcpyPeerAsync (peer access enabled on first use where
  // the GPUs allow it) or, on one GPU, a device-to-device copy.
  void make_current() override;
  void wait_for(Backend& other) override;
  void copy_from(Backend& from, void* dst, const void* src, size_t bytes) override;
  // Step recordings instantiated so far (tests check that a step stayed inside a graph).
  size_t graph_count() const { return graphs_.size(); }
  // Waits for the stream, then destroys every step recording; a later replay() of one throws.
  // Called before a communicator that recordings captured is destroyed or aborted: NCCL (>= 2.26)
  // does not release a communicator while a live graph still holds its captured work, so the
  // recordings must go first (kernels/cuda/nccl_collective.cc).
  void destroy_graphs() noexcept;

  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  cudnnHandle_t cudnn() const { return cudnn_; }
  cublasHandle_t cublas() const { return cublas_; }
  cublasLtHandle_t cublas_lt() const { return cublas_lt_; }
  // The cuBLAS workspace, which cuBLASLt products (kernels/cuda/lt_matmul.h) share: one stream.
  void* cublas_workspace() const { return cublas_workspace_; }
  size_t cublas_workspace_bytes() const { return cublas_workspace_bytes_; }
  bool deterministic() const { return deterministic_; }
  CappedDeviceAllocator& device_allocator() { return *alloc_; }
  const cudaDeviceProp& properties() const { return prop_; }
  double peak_flops() const override;
  // The FP32 units' peak (SMs x peak clock x 2 x FMA lanes), whatever the math: what the direct
  // convolution kernels (direct_conv.cuh) can reach at most. 0 for architectures not listed.
  double fp32_core_flops() const;

 private:
  void release() noexcept;
  double clocks_per_second() const;

  int device_;
  MathMode math_;
  bool deterministic_;
  cudaDeviceProp prop_{};
  cudaStream_t stream_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t cublas_lt_ = nullptr;
  std::unique_ptr<CudaHeap> heap_;
  std::unique_ptr<CappedDeviceAllocator> alloc_;
  void* cublas_workspace_ = nullptr;
  size_t cublas_workspace_bytes_ = 0;
  std::unique_ptr<cuda::StagingRing> staging_;
  // upload_inputs: the copy engine's stream, and the landing zone's two states: free (its last
  // pieces moved out, on stream_) and full (the next pieces landed, on copy_stream_).
  cudaStream_t copy_stream_ = nullptr;
  cudaEvent_t landing_free_ = nullptr, landing_full_ = nullptr;
  std::vector<cudaGraphExec_t> graphs_;  // instantiated step recordings
  cudaEvent_t handoff_ = nullptr;        // recorded on stream_ when another backend waits for it
  std::vector<int> peers_;               // GPUs whose memory this one's peer access was enabled for
  // Libraries' one-time start-up beside the context's creation and the plan (warm_libraries in
  // cuda_backend.cc); joined by release().
  std::thread warm_up_;
};

// The CUDA backend of a kernel's context (CUDA kernels are only created for a CudaBackend).
CudaBackend& cuda_of(const KernelContext& ctx);

// For kernels/register_backends.cc. cuda_list_gpus never throws: without a driver or GPU it returns
// an empty list and says why.
std::vector<GpuInfo> cuda_list_gpus(std::string* why_none);
std::string cuda_version_string();      // "driver 13.0, runtime 13.0, cuDNN 9.19.0, cuBLAS 13.1.0"
std::string cuda_collective_library();  // "NCCL 2.28.9"; "" in a build without NCCL
int cuda_gpu_count();                   // cudaGetDeviceCount, 0 on any error; opens no context
std::unique_ptr<Backend> create_cuda_backend(int index, const DeviceRequest& req);

}  // namespace trainer
