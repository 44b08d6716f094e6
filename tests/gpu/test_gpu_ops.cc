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

// The elementwise optimizers' step with the 16-bit copy of the weights written beside them, the
// filters' copies laid out (K, R, S, C) (OptimizerKernel::fuse_low_precision_copy: a block per
// filter row in large arenas, staged in shared memory, other ranges by chunks; a weight a thread in
// small ones): the same weights and state bits as the step without the copy, and the same copy bits
// as converting the updated weights after the step (Backend::convert, then convert_filter_krsc per
// filter). Filters of 3 input channels, 1 x 1, 5 x 5, one at the arena's start, one row larger than
// a block's threads, others with ranges between and after them; bf16 and fp16; then a skipped step
// (a non-finite gradient) changes neither.
TEST_CASE("gpu optimizer steps write the (K, R, S, C) 16-bit filters as the separate conversion",
          "[gpu][optim]") {
  CudaBackend& be = cuda_backend();
  std::vector<LowFilterLayout> filters;
  const auto filter = [&](int64_t offset, int64_t k, int64_t c, int64_t r, int64_t s) {
    LowFilterLayout f;
    f.offset = offset;
    f.k = k;
    f.c = c;
    f.r = r;
    f.s = s;
    filters.push_back(f);
    return offset + k * c * r * s;
  };
  // Out of order: the step sorts them.
  int64_t end = filter(0, 8, 3, 3, 3);                   // 216, the arena's start
  end = filter(end + 40, 6, 16, 1, 1);                   // a gap of plain weights before
  const int64_t late = filter(end + 4100, 5, 40, 3, 3);  // a gap of more than one chunk before
  const int64_t wide = filter(late + 8, 3, 64, 5, 5);    // 1600-weight rows
  std::swap(filters[0], filters[2]);
  // Plain weights after the last filter: few (a small arena, a weight a thread) or a million (a
  // large arena, a block a filter row).
  for (const int64_t tail : {int64_t(5000), int64_t(1) << 20})
    for (DType t : {DType::bf16, DType::f16})
      for (const char* yaml :
           {"{type: sgd, momentum: 0.9, weight_decay: 0.0005}", "{type: adamw, weight_decay: 0.01}"}) {
        const int64_t n = wide + tail;
        const std::vector<ParamRange> tensors = {{0, n}};
        INFO(dtype_name(t) << " " << yaml << ", " << n << " weights");
        const Optimizer opt(optim_tests::optimizer_from(yaml));
        const size_t slots = size_t(opt.state_slots());
        auto fused = opt.make_kernel(be, n, tensors), plain = opt.make_kernel(be, n, tensors);
        Buffer low(be, size_t(n) * 2), ref_low(be, size_t(n) * 2);
        REQUIRE(fused->fuse_low_precision_copy(low.get(), t, filters));
        const std::vector<float> w0 = random_vector(size_t(n), 31);
        Buffer wa(be, size_t(n) * 4), wb(be, size_t(n) * 4), g(be, size_t(n) * 4),
            sa(be, std::max<size_t>(slots, 1) * size_t(n) * 4),
            sb(be, std::max<size_t>(slots, 1) * size_t(n) * 4), scalars(be, sizeof(StepScalars));
        wa.upload(w0);
        wb.upload(w0);
        const std::vector<float> zeros(std::max<size_t>(slots, 1) * size_t(n), 0.f);
        sa.upload(zeros);
        sb.upload(zeros);
        float* slots_a[] = {sa.as(), sa.as() + n, sa.as() + 2 * n};
        float* slots_b[] = {sb.as(), sb.as() + n, sb.as() + 2 * n};
        const auto reference_copy = [&] {
          be.convert(ref_low.get(), t, wb.as(), DType::f32, n, false);
          for (const LowFilterLayout& f : filters)
            be.convert_filter_krsc(ref_low.as<char>() + size_t(f.offset) * 2, t, wb.as() + f.offset, f);
        };
        for (int64_t step = 1; step <= 3; ++step) {
          StepScalars s;
          opt.prepare(s, step, 0.01f);
          if (step == 3) s.nonfinite = kNonfiniteGradients;  // skipped: nothing changes
          be.copy_to_device(scalars.get(), &s, sizeof s);
          g.upload(random_vector(size_t(n), 200 + uint64_t(step), -0.1f, 0.1f));
          fused->step(wa.as(), g.as(), slots_a, scalars.as<StepScalars>());
          plain->step(wb.as(), g.as(), slots_b, scalars.as<StepScalars>());
          if (step < 3) reference_copy();
          const std::vector<float> a = wa.download(size_t(n)), b = wb.download(size_t(n));
          CHECK(a == b);
          if (step == 3) CHECK(a != w0);  // two updates before, none now
          CHECK(sa.download(zeros.size()) == sb.download(zeros.size()));
          CHECK(low.download<uint16_t>(size_t(n)) == ref_low.download<uint16_t>(size_t(n)));
        }
      }
  // More filters than the step's table: the executor converts after the step instead.
  const Optimizer opt(optim_tests::optimizer_from("{type: sgd}"));
  auto step = opt.make_kernel(be, 65 * 27, {{0, 65 * 27}});
  std::vector<LowFilterLayout> many(65);
  for (size_t i = 0; i < many.size(); ++i) {
    many[i].offset = int64_t(i) * 27;
    many[i].k = 1;
    many[i].c = 3;
    many[i].r = many[i].s = 3;
  }
  Buffer low(be, 65 * 27 * 2);
  CHECK_FALSE(step->fuse_low_precision_copy(low.get(), DType::bf16, many));
}
