// The CUDA backend's non-layer ops against the CPU backend's (the losses: test_gpu_losses.cc):
//   optimizer updates (sgd plain / momentum+dampening / nesterov+decay, adam, adamw, nadam,
//   rmsprop plain / centered+momentum), three steps with StepScalars from Optimizer::prepare in
//   device memory: weights and state rel < 1e-6 (the kernels avoid FMA contraction, so they are
//   expected to be bit-identical in practice);
// plus the backend plumbing: staged copies, error checks.
#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/optimizer_rows.h"

using namespace trainer;
using namespace trainer::gpu_test;

// Every row of the optimizer conformance table (tests/optimizer_rows.h) on the GPU against the CPU:
// an arena of tensors of several sizes (LAMB's per-tensor norms span several chunks in the largest)
// with padding between them, three steps.
TEST_CASE("gpu optimizer steps match the CPU", "[gpu][optim]") {
  const std::vector<ParamRange> tensors = {{0, 10007}, {10016, 33}, {10112, 20000}, {30208, 1}};
  const int64_t n = 30224;
  CudaBackend& be = cuda_backend();
  for (const optim_tests::OptimizerRow& row : optim_tests::optimizer_rows()) {
    INFO("optimizer " << row.yaml);
    const Optimizer opt(optim_tests::optimizer_from(row.yaml));
    const size_t slots = size_t(opt.state_slots());
    std::vector<float> w0(size_t(n), 0.f);
    const std::vector<float> r0 = random_vector(size_t(n), 21);
    for (const ParamRange& t : tensors) std::copy_n(r0.begin() + t.offset, t.size, w0.begin() + t.offset);
    std::vector<float> w_cpu = w0, state_cpu(std::max<size_t>(slots * size_t(n), 1), 0.f);
    auto cpu_step = opt.make_kernel(cpu_backend(), n, tensors);
    std::vector<char> cpu_scratch(cpu_step->scratch_bytes() + 1);
    cpu_step->bind(cpu_scratch.data());
    auto gpu_step = opt.make_kernel(be, n, tensors);
    Buffer wb(be, size_t(n) * 4), gb(be, size_t(n) * 4), sb(be, state_cpu.size() * 4),
        scb(be, sizeof(StepScalars)), scratch(be, gpu_step->scratch_bytes());
    gpu_step->bind(scratch.get());
    wb.upload(w0);
    sb.upload(state_cpu);
    StepScalars s_cpu, s_gpu;
    for (int64_t t = 1; t <= 3; ++t) {
      std::vector<float> g = random_vector(size_t(n), 100 + uint64_t(t), -0.1f, 0.1f);
      for (int64_t i = 0; i < n; ++i)  // padding gradients are zero, as in the executor's arena
        if (std::none_of(tensors.begin(), tensors.end(),
                         [&](const ParamRange& r) { return i >= r.offset && i < r.offset + r.size; }))
          g[size_t(i)] = 0.f;
      opt.prepare(s_cpu, t, 0.01f * float(t));
      float* cpu_slots[] = {state_cpu.data(), state_cpu.data() + n, state_cpu.data() + 2 * n};
      cpu_step->step(w_cpu.data(), g.data(), cpu_slots, &s_cpu);
      opt.prepare(s_gpu, t, 0.01f * float(t));
      be.copy_to_device(scb.get(), &s_gpu, sizeof s_gpu);  // read by the kernel, not passed by value
      gb.upload(g);
      float* gpu_slots[] = {sb.as(), sb.as() + n, sb.as() + 2 * n};
      gpu_step->step(wb.as(), gb.as(), gpu_slots, scb.as<StepScalars>());
    }
    const std::vector<float> w_gpu = wb.download(size_t(n));
    const std::vector<float> state_gpu = sb.download(state_cpu.size());
    std::vector<float> dw_cpu(w0.size()), dw_gpu(w0.size());
    for (size_t i = 0; i < size_t(n); ++i) {
      dw_cpu[i] = w_cpu[i] - w0[i];
      dw_gpu[i] = w_gpu[i] - w0[i];
    }
    const double ew = rel_error(w_gpu, w_cpu), edw = rel_error(dw_gpu, dw_cpu);
    const double es = slots ? rel_error(state_gpu, state_cpu) : 0.0;
    INFO("rel error w " << ew << ", update " << edw << ", state " << es);
    CHECK(ew < 1e-6);
    CHECK(edw < 1e-6);
    CHECK(es < 1e-6);
    CHECK(scb.download<StepScalars>(1)[0].nonfinite == 0);
  }
}

TEST_CASE("gpu staged copies leave the host source free at once", "[gpu][backend]") {
  CudaBackend& be = cuda_backend();
  // Many small copies from one reused host buffer: more than the ring's events and bytes.
  const size_t n = 256 * 1024, copies = 300;  // 1 MiB each
  Buffer dst(be, n * 4 * copies);
  std::vector<float> host(n);
  for (size_t c = 0; c < copies; ++c) {
    std::fill(host.begin(), host.end(), float(c));
    be.copy_to_device(dst.as() + c * n, host.data(), n * 4);
  }
  std::fill(host.begin(), host.end(), -1.f);
  const std::vector<float> back = dst.download(n * copies);
  bool ok = true;
  for (size_t c = 0; c < copies; ++c) ok = ok && back[c * n] == float(c) && back[c * n + n - 1] == float(c);
  CHECK(ok);
  // A copy larger than half the ring goes synchronously.
  const std::vector<float> big = random_vector(size_t(40) << 20 >> 2, 77);
  Buffer bb(be, big.size() * 4);
  bb.upload(big);
  CHECK(bb.download(big.size()) == big);
}

TEST_CASE("gpu error checks name the call, the place and the device", "[gpu][backend]") {
  try {
    CUDA_CHECK(cudaSetDevice(9999));
    FAIL("expected a RuntimeError");
  } catch (const RuntimeError& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("cudaSetDevice(9999)"));
    CHECK_THAT(m, Catch::Contains("test_gpu_ops.cc:"));
    CHECK_THAT(m, Catch::Contains("gpu:"));
    CHECK_THAT(m, Catch::Contains("cudaErrorInvalidDevice"));
  }
  // The backend still works after the failed call.
  Buffer b(cuda_backend(), 16);
  b.upload(std::vector<float>{1, 2, 3, 4});
  CHECK(b.download(4) == std::vector<float>{1, 2, 3, 4});
}
