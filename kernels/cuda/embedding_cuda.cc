// embedding on the GPU (embedding.cu): the CPU's gather forward (channels-first output, clamped
// ids) and a deterministic sort-based dW without floating-point atomics; no gradient for the
// ids (dx = 0).
//   x: (B, L) float token ids   W: (V, D)   y: (B, D, L)
//   workspace: the backward's keys, positions, sorted copies, per-chunk run sums, cub scratch
// Clamped ids: the forward kernel flags them (with one example) in a small host-mapped
// EmbeddingReport, so no step ever waits for the device. The host reads it (a plain memory read,
// no CUDA call) at the start of every forward it issues and when the kernel is destroyed, and
// warns once per kernel like the CPU (without the CPU's per-batch count). Steps replayed from a CUDA graph
// run no host code, so there the warning comes at the next eagerly issued forward (predict, a recapture) or
// at the end of the run.
#include <spdlog/spdlog.h>

#include <new>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/embedding.cuh"
#include "lib/layers/embedding.h"

namespace trainer {
namespace {

class EmbeddingCuda : public LayerKernel {
 public:
  EmbeddingCuda(const Embedding& l, const KernelContext& ctx)
      : be_(cuda_of(ctx)),
        name_(l.name()),
        g_{ctx.batch, l.length(), l.input_dim, l.output_dim, l.channels_first},
        backward_(g_) {
    void* host = nullptr;
    CUDA_CHECK(cudaHostAlloc(&host, sizeof(cuda::EmbeddingReport), cudaHostAllocMapped));
    report_ = new (host) cuda::EmbeddingReport();
    void* dev = nullptr;
    const cudaError_t e = cudaHostGetDevicePointer(&dev, host, 0);
    if (e != cudaSuccess) cudaFreeHost(host);
    CUDA_CHECK(e);
    report_dev_ = static_cast<cuda::EmbeddingReport*>(dev);
  }

  ~EmbeddingCuda() override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(be_.stream(), &status) == cudaSuccess &&
        status == cudaStreamCaptureStatusNone && cudaStreamSynchronize(be_.stream()) == cudaSuccess)
      check_report();
    cudaFreeHost(report_);
  }

  size_t workspace_bytes() const override { return backward_.workspace_bytes(); }

  void bind(const KernelBinding& b) override {
    a_ = BoundActivations(b);
    w_ = b.param(0).f32();
    dw_ = b.grad(0).f32();
    accumulate_ = b.accumulate_param_grads;
    backward_.bind(b.workspace);
  }

  bool accumulates_param_grads() const override { return true; }

  void forward(bool) override {
    const float* x = a_.x;
    float* y = a_.y;
    check_report();
    cuda::launch_embedding_forward(g_, x, w_, y, report_dev_, be_.stream());
  }

  void backward() override {
    const float *x = a_.x, *dy = a_.dy;
    float* dx = a_.dx;
    backward_.run(x, dy, dw_, accumulate_, be_.stream());
    if (dx) CUDA_CHECK(cudaMemsetAsync(dx, 0, size_t(g_.positions()) * sizeof(float), be_.stream()));
  }

 private:
  BoundActivations a_;
  // Warns once when the device has flagged a clamped id (the flag may lag the stream).
  void check_report() {
    if (warned_) return;
    const volatile cuda::EmbeddingReport* r = report_;
    if (!r->clamped) return;
    warned_ = true;
    spdlog::warn(
        "embedding '{}': token ids that are not integers in [0, {}) (e.g. {}) were "
        "clamped; input_dim must exceed the largest id in the data",
        name_, g_.vocab, double(r->example));
  }

  CudaBackend& be_;
  std::string name_;
  cuda::EmbeddingGeometry g_;
  cuda::EmbeddingBackward backward_;
  cuda::EmbeddingReport* report_ = nullptr;      // host view
  cuda::EmbeddingReport* report_dev_ = nullptr;  // the same memory, as the device sees it
  bool warned_ = false;
  const float* w_ = nullptr;
  float* dw_ = nullptr;
  bool accumulate_ = false;  // add into dw_ (a tied weight: a later layer wrote it)
};

}  // namespace

std::unique_ptr<LayerKernel> make_embedding_cuda(const Layer& l, const KernelContext& ctx) {
  return std::make_unique<EmbeddingCuda>(static_cast<const Embedding&>(l), ctx);
}

}  // namespace trainer
