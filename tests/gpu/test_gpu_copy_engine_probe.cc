// Not a check (hidden, run with its tag on a 2-GPU machine): whether an all-reduce made of peer
// copies would spare the GEMMs that NCCL slows down. On gpt2_small's data-parallel step (2x H200)
// the backward pass's persistent cuBLASLt GEMMs ran 20-40% slower while NCCL's all-reduce held 24
// SMs (docs/performance.md, "Where two GPUs' 1.8 ms go"). Copy engines move bytes without SMs.
// Prints, for 128 MB of floats a GPU:
//   - the all-reduce through the project's NCCL collective (DeviceCollective::all_reduce_sum), and
//     through copies: each GPU pushes the half the other owns (cudaMemcpyPeerAsync on its own
//     stream, so its copy engine), each sums its half (launch_convert, accumulating), each pushes its
//     summed half back;
//   - a bf16 GEMM of gpt2_small's MLP (8192 x 3072 x 768) alone, beside NCCL's all-reduces, and
//     beside the copies' (both GPUs computing, as in a step).
// The copies' sum is checked against the expected values, so a wrong ordering shows.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "kernels/cuda/convert.cuh"
#include "kernels/cuda/cuda_check.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/two_replicas.h"

using namespace trainer;
using namespace trainer::gpu_test;

namespace {

constexpr int64_t kFloats = int64_t(32) << 20;  // 128 MB a GPU
constexpr int kSums = 4, kGemms = 40;
constexpr int kM = 8192, kN = 3072, kK = 768;

float ms_between(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}

// One device's part of the copy-engine probe.
struct Side {
  int device = 0;
  cudaStream_t compute = nullptr, copy = nullptr;
  cublasHandle_t blas = nullptr;
  float* x = nullptr;      // kFloats
  float* stage = nullptr;  // kFloats / 2: the other GPU's copy of the half this one owns
  void *a = nullptr, *b = nullptr, *c = nullptr;  // the GEMM's bf16 operands
  cudaEvent_t pushed = nullptr, returned = nullptr, t0 = nullptr, t1 = nullptr;

  void make(int d) {
    device = d;
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    REQUIRE(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS);
    REQUIRE(cublasSetStream(blas, compute) == CUBLAS_STATUS_SUCCESS);
    CUDA_CHECK(cudaMalloc(&x, size_t(kFloats) * 4));
    CUDA_CHECK(cudaMalloc(&stage, size_t(kFloats / 2) * 4));
    CUDA_CHECK(cudaMalloc(&a, size_t(kM) * kK * 2));
    CUDA_CHECK(cudaMalloc(&b, size_t(kK) * kN * 2));
    CUDA_CHECK(cudaMalloc(&c, size_t(kM) * kN * 2));
    CUDA_CHECK(cudaMemset(a, 0, size_t(kM) * kK * 2));
    CUDA_CHECK(cudaMemset(b, 0, size_t(kK) * kN * 2));
    for (cudaEvent_t* e : {&pushed, &returned})
      CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    for (cudaEvent_t* e : {&t0, &t1}) CUDA_CHECK(cudaEventCreate(e));
    const int other = 1 - d;
    const cudaError_t st = cudaDeviceEnablePeerAccess(other, 0);
    if (st == cudaErrorPeerAccessAlreadyEnabled)
      (void)cudaGetLastError();
    else
      CUDA_CHECK(st);
  }
  void release() {
    CUDA_CHECK(cudaSetDevice(device));
    for (void* p : {static_cast<void*>(x), static_cast<void*>(stage), a, b, c}) cudaFree(p);
    for (cudaEvent_t e : {pushed, returned, t0, t1}) cudaEventDestroy(e);
    cublasDestroy(blas);
    cudaStreamDestroy(compute);
    cudaStreamDestroy(copy);
  }
  void gemms(int n) const {
    CUDA_CHECK(cudaSetDevice(device));
    const float one = 1.f, zero = 0.f;
    for (int i = 0; i < n; ++i)
      REQUIRE(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, kN, kM, kK, &one, b, CUDA_R_16BF, kN, a,
                           CUDA_R_16BF, kK, &zero, c, CUDA_R_16BF, kN, CUBLAS_COMPUTE_32F,
                           CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS);
  }
};

// One all-reduce of x over the two sides by peer copies on their copy streams. Side d owns half d.
void copy_all_reduce(Side* s) {
  const int64_t h = kFloats / 2;
  for (int d = 0; d < 2; ++d) {  // push the half the other side owns
    Side& me = s[d];
    const Side& other = s[1 - d];
    CUDA_CHECK(cudaSetDevice(me.device));
    CUDA_CHECK(cudaMemcpyPeerAsync(other.stage, other.device, me.x + (1 - d) * h, me.device, size_t(h) * 4,
                                   me.copy));
    CUDA_CHECK(cudaEventRecord(me.pushed, me.copy));
  }
  for (int d = 0; d < 2; ++d) {  // sum the owned half once the other's copy of it arrived, push it back
    Side& me = s[d];
    Side& other = s[1 - d];
    CUDA_CHECK(cudaSetDevice(me.device));
    CUDA_CHECK(cudaStreamWaitEvent(me.copy, other.pushed, 0));
    cuda::launch_convert(me.x + d * h, DType::f32, me.stage, DType::f32, h, true, me.copy);
    CUDA_CHECK(
        cudaMemcpyPeerAsync(other.x + d * h, other.device, me.x + d * h, me.device, size_t(h) * 4, me.copy));
    CUDA_CHECK(cudaEventRecord(me.returned, me.copy));
  }
  for (int d = 0; d < 2; ++d) {  // each side's x whole again before its next use
    CUDA_CHECK(cudaSetDevice(s[d].device));
    CUDA_CHECK(cudaStreamWaitEvent(s[d].copy, s[1 - d].returned, 0));
  }
}

}  // namespace

TEST_CASE("gpu copy-engine all-reduce probe: NCCL against peer copies, and a GEMM beside each", "[.probe]") {
  if (!have_two_gpus()) return;
  int can01 = 0, can10 = 0;
  CUDA_CHECK(cudaDeviceCanAccessPeer(&can01, 0, 1));
  CUDA_CHECK(cudaDeviceCanAccessPeer(&can10, 1, 0));
  if (!can01 || !can10) {
    std::cout << "SKIPPED: GPUs 0 and 1 have no peer access\n";
    return;
  }
  // Through copies, one thread driving both GPUs.
  Side s[2];
  s[0].make(0);
  s[1].make(1);
  for (int d = 0; d < 2; ++d) {  // x_d = d + 1 everywhere: every sum is 3
    CUDA_CHECK(cudaSetDevice(d));
    std::vector<float> v(size_t(kFloats), float(d + 1));
    CUDA_CHECK(cudaMemcpy(s[d].x, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
  }
  copy_all_reduce(s);
  for (int d = 0; d < 2; ++d) {
    CUDA_CHECK(cudaSetDevice(d));
    CUDA_CHECK(cudaStreamSynchronize(s[d].copy));
    std::vector<float> v(static_cast<size_t>(kFloats));
    CUDA_CHECK(cudaMemcpy(v.data(), s[d].x, v.size() * 4, cudaMemcpyDeviceToHost));
    CHECK(std::count(v.begin(), v.end(), 3.f) == kFloats);
  }
  const auto sync_all = [&] {
    for (int d = 0; d < 2; ++d) {
      CUDA_CHECK(cudaSetDevice(d));
      CUDA_CHECK(cudaDeviceSynchronize());
    }
  };
  // Copies alone.
  sync_all();
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaEventRecord(s[0].t0, s[0].copy));
  for (int i = 0; i < kSums; ++i) copy_all_reduce(s);
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaEventRecord(s[0].t1, s[0].copy));
  sync_all();
  const float copies_ms = ms_between(s[0].t0, s[0].t1) / kSums;
  // GEMMs alone, then beside the copies (both GPUs computing).
  s[0].gemms(5);
  s[1].gemms(5);
  sync_all();
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaEventRecord(s[0].t0, s[0].compute));
  s[0].gemms(kGemms);
  CUDA_CHECK(cudaEventRecord(s[0].t1, s[0].compute));
  sync_all();
  const float gemm_ms = ms_between(s[0].t0, s[0].t1) / kGemms;
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaEventRecord(s[0].t0, s[0].compute));
  for (int i = 0; i < kSums; ++i) copy_all_reduce(s);
  s[0].gemms(kGemms);
  s[1].gemms(kGemms);
  CUDA_CHECK(cudaSetDevice(0));
  CUDA_CHECK(cudaEventRecord(s[0].t1, s[0].compute));
  sync_all();
  const float gemm_copies_ms = ms_between(s[0].t0, s[0].t1) / kGemms;
  for (Side& side : s) side.release();
  CUDA_CHECK(cudaSetDevice(0));

  // Through the project's NCCL collective, a thread and backend a GPU.
  float nccl_ms[2] = {0, 0}, gemm_nccl_ms[2] = {0, 0};
  const std::vector<std::string> errors =
      on_two_replicas([&](CudaBackend& be, DeviceCollective& dc, Communicator& comm, int r) {
        Side g;  // only its GEMM operands and handle: on this replica's device and stream
        g.device = be.device();
        g.blas = be.cublas();
        Buffer x(be, size_t(kFloats) * 4), a(be, size_t(kM) * kK * 2), b(be, size_t(kK) * kN * 2),
            c(be, size_t(kM) * kN * 2);
        be.zero(x.get(), size_t(kFloats) * 4);
        be.zero(a.get(), size_t(kM) * kK * 2);
        be.zero(b.get(), size_t(kK) * kN * 2);
        g.a = a.get();
        g.b = b.get();
        g.c = c.get();
        cudaEvent_t t0, t1;
        CUDA_CHECK(cudaEventCreate(&t0));
        CUDA_CHECK(cudaEventCreate(&t1));
        const auto barrier = [&] {
          be.synchronize();
          uint64_t v = 0;
          comm.all_reduce_max(&v, 1);
        };
        dc.all_reduce_sum(x.as<float>(), kFloats, false);  // NCCL's first call sets itself up
        barrier();
        CUDA_CHECK(cudaEventRecord(t0, be.stream()));
        for (int i = 0; i < kSums; ++i) dc.all_reduce_sum(x.as<float>(), kFloats, false);
        CUDA_CHECK(cudaEventRecord(t1, be.stream()));
        barrier();
        nccl_ms[r] = ms_between(t0, t1) / kSums;
        CUDA_CHECK(cudaEventRecord(t0, be.stream()));
        for (int i = 0; i < kSums; ++i) dc.all_reduce_sum_async(x.as<float>(), kFloats, false);
        g.gemms(kGemms);
        CUDA_CHECK(cudaEventRecord(t1, be.stream()));
        dc.wait_all();
        barrier();
        gemm_nccl_ms[r] = ms_between(t0, t1) / kGemms;
        cudaEventDestroy(t0);
        cudaEventDestroy(t1);
      });
  REQUIRE(errors[0].empty());
  REQUIRE(errors[1].empty());
  std::printf(
      "all-reduce of 128 MB a GPU: NCCL %.3f ms, peer copies %.3f ms\n"
      "bf16 GEMM %dx%dx%d: alone %.1f us, beside NCCL's all-reduces %.1f us (GPU 0; GPU 1 %.1f), beside the "
      "copies' %.1f us\n",
      nccl_ms[0], copies_ms, kM, kN, kK, gemm_ms * 1e3f, gemm_nccl_ms[0] * 1e3f, gemm_nccl_ms[1] * 1e3f,
      gemm_copies_ms * 1e3f);
}
