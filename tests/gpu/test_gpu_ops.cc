// The CUDA backend's non-layer ops against the CPU backend's:
//   loss (nll, crossentropy from logits / probabilities): dout and the loss sum, rel < 1e-6;
//   confusion and top-k counts: identical;
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

namespace {

constexpr int64_t kBatch = 37, kClasses = 10;

std::vector<int32_t> labels_for(int64_t batch, int64_t classes, uint64_t seed) {
  SplitMix64 rng = SplitMix64::counter(seed);
  std::vector<int32_t> y(size_t(batch), 0);
  for (auto& v : y) v = int32_t(rng.next_u64() % uint64_t(classes));
  return y;
}

// Outputs with ties in some rows (all equal; the label tied with others) to pin tie rules.
std::vector<float> outputs_with_ties(const std::vector<int32_t>& labels, uint64_t seed) {
  std::vector<float> out = random_vector(size_t(kBatch * kClasses), seed, -3.f, 3.f);
  std::fill(out.begin(), out.begin() + kClasses, 0.5f);                       // row 0: all tied
  for (int64_t c = 0; c < kClasses; c += 2) out[size_t(kClasses + c)] = 2.f;  // row 1: ties
  out[size_t(kClasses + labels[1])] = 2.f;
  return out;
}

struct OpsRun {
  std::vector<float> dout, metrics;
};

// loss twice (accumulating), confusion and top-k for k = 1, 3, 5 on one backend.
OpsRun run_ops(Backend& be, LossKind kind, const std::vector<float>& out,
               const std::vector<int32_t>& labels) {
  const size_t n = out.size(), n_metrics = 1 + 3 + size_t(kClasses * kClasses);
  Buffer ob(be, n * 4), lb(be, labels.size() * 4), db(be, n * 4), mb(be, n_metrics * 4);
  ob.upload(out);
  lb.upload(labels);
  be.zero(mb.get(), n_metrics * 4);
  float* m = mb.as();
  for (int rep = 0; rep < 2; ++rep) be.loss(kind, ob.as(), lb.as<int32_t>(), kBatch, kClasses, db.as(), m);
  const int64_t ks[3] = {1, 3, 5};
  for (int i = 0; i < 3; ++i) be.topk_correct(ob.as(), lb.as<int32_t>(), kBatch, kClasses, ks[i], m + 1 + i);
  be.confusion(ob.as(), lb.as<int32_t>(), kBatch, kClasses, m + 4);
  return OpsRun{db.download(n), mb.download(n_metrics)};
}

}  // namespace

TEST_CASE("gpu losses, confusion and top-k match the CPU", "[gpu][ops]") {
  const std::vector<int32_t> labels = labels_for(kBatch, kClasses, 5);
  for (LossKind kind : {LossKind::nll, LossKind::cross_entropy_logits, LossKind::cross_entropy_probs}) {
    INFO("loss kind " << int(kind));
    std::vector<float> out = outputs_with_ties(labels, 9);
    if (kind == LossKind::cross_entropy_probs) {
      for (auto& v : out) v = (v + 3.f) / 6.f;      // probabilities-ish in [0, 1]
      out[size_t(2 * kClasses + labels[2])] = 0.f;  // clipped from below: zero gradient
      out[size_t(3 * kClasses + labels[3])] = 1.f;  // clipped from above
    }
    const OpsRun cpu = run_ops(cpu_backend(), kind, out, labels);
    const OpsRun gpu = run_ops(cuda_backend(), kind, out, labels);
    const double ed = rel_error(gpu.dout, cpu.dout);
    INFO("dout rel error " << ed << "; loss cpu " << cpu.metrics[0] << " gpu " << gpu.metrics[0]);
    CHECK(ed < 1e-6);
    CHECK(std::abs(gpu.metrics[0] - cpu.metrics[0]) <= 1e-6 * std::abs(cpu.metrics[0]));
    // top-k and the confusion matrix: exactly the same counts.
    CHECK(std::vector<float>(gpu.metrics.begin() + 1, gpu.metrics.end()) ==
          std::vector<float>(cpu.metrics.begin() + 1, cpu.metrics.end()));
    CHECK(gpu.metrics[1] <= gpu.metrics[2]);
  }
}

TEST_CASE("gpu metrics handle a large batch with many classes", "[gpu][ops]") {
  const int64_t batch = 3000, classes = 1000;
  const std::vector<int32_t> labels = labels_for(batch, classes, 3);
  const std::vector<float> out = random_vector(size_t(batch * classes), 4, -5.f, 5.f);
  std::vector<float> loss_cpu(1, 0.f), loss_gpu(1, 0.f);
  std::vector<float> d_cpu(out.size());
  cpu_backend().loss(LossKind::cross_entropy_logits, out.data(), labels.data(), batch, classes, d_cpu.data(),
                     loss_cpu.data());
  Backend& be = cuda_backend();
  Buffer ob(be, out.size() * 4), lb(be, labels.size() * 4), db(be, out.size() * 4), mb(be, 4);
  ob.upload(out);
  lb.upload(labels);
  be.zero(mb.get(), 4);
  be.loss(LossKind::cross_entropy_logits, ob.as(), lb.as<int32_t>(), batch, classes, db.as(), mb.as());
  CHECK(rel_error(db.download(out.size()), d_cpu) < 1e-6);
  CHECK(std::abs(mb.download(1)[0] - loss_cpu[0]) <= 1e-6 * loss_cpu[0]);
}

namespace {

struct LossAndMetrics {
  std::vector<float> dout, loss_and_confusion;
  uint32_t nonfinite = 0;
};

// Backend::loss_and_metrics (fused: the GPU's one kernel) or its parts one by one (the base
// class's definition, called explicitly), twice (accumulating), on one backend.
LossAndMetrics loss_and_metrics(Backend& be, bool fused, LossKind kind, const std::vector<float>& out,
                                const std::vector<int32_t>& labels, int64_t classes, float smoothing) {
  const int64_t batch = int64_t(labels.size());
  const size_t n = out.size(), n_metrics = 1 + size_t(classes * classes);
  Buffer ob(be, n * 4), lb(be, labels.size() * 4), db(be, n * 4), mb(be, n_metrics * 4),
      sb(be, sizeof(StepScalars));
  ob.upload(out);
  lb.upload(labels);
  be.zero(mb.get(), n_metrics * 4);
  be.zero(sb.get(), sizeof(StepScalars));
  auto* guard = static_cast<StepScalars*>(sb.get());
  float* m = mb.as();
  for (int rep = 0; rep < 2; ++rep) {
    if (fused)
      be.loss_and_metrics(kind, ob.as(), lb.as<int32_t>(), batch, classes, db.as(), m, smoothing, guard,
                          kNonfiniteLoss, m + 1);
    else
      be.Backend::loss_and_metrics(kind, ob.as(), lb.as<int32_t>(), batch, classes, db.as(), m, smoothing,
                                   guard, kNonfiniteLoss, m + 1);
  }
  LossAndMetrics r{db.download(n), mb.download(n_metrics), 0};
  StepScalars host;
  be.synchronize();
  if (be.host_memory())
    host = *guard;
  else
    CUDA_CHECK(cudaMemcpy(&host, guard, sizeof(host), cudaMemcpyDeviceToHost));
  r.nonfinite = host.nonfinite;
  return r;
}

}  // namespace

// The loss, the guard's check of its sum and the confusion matrix in one kernel equal the three
// apart (and the CPU's): the row-per-warp path (10 classes) and the general one (40 classes, and
// label smoothing on logits), ties, a NaN in a row's first output (argmax 0) and elsewhere (never the
// argmax), a row of -inf; the NaNs make the loss sum non-finite, which the guard must see. Batches
// of one block (37 rows), of many (1,000: the last block sums the partials) and past one row a
// warp (3,000 rows over 256 blocks of 8 warps).
TEST_CASE("gpu loss, non-finite check and confusion in one kernel equal them apart", "[gpu][ops]") {
  for (const int64_t batch : {kBatch, int64_t(1000), int64_t(3000)})
    for (const int64_t classes : {int64_t(10), int64_t(40)}) {
      for (const float smoothing : {0.f, 0.1f}) {
        for (LossKind kind : {LossKind::nll, LossKind::cross_entropy_logits, LossKind::cross_entropy_probs}) {
          if (smoothing != 0.f && kind != LossKind::cross_entropy_logits) continue;  // smoothing: logits only
          for (const bool with_nan : {false, true}) {
            INFO(batch << " rows, " << classes << " classes, smoothing " << smoothing << ", loss kind "
                       << int(kind) << (with_nan ? ", NaNs" : ""));
            const std::vector<int32_t> labels = labels_for(batch, classes, 7);
            std::vector<float> out = random_vector(size_t(batch * classes), 11, -3.f, 3.f);
            if (kind == LossKind::cross_entropy_probs)
              for (auto& v : out) v = (v + 3.f) / 6.f;
            std::fill(out.begin(), out.begin() + classes, 0.5f);                         // row 0: all tied
            for (int64_t c = 0; c < classes; c += 3) out[size_t(classes + c)] = 0.9f;    // row 1: ties
            std::fill(out.begin() + 2 * classes, out.begin() + 3 * classes, -INFINITY);  // row 2
            out[size_t(2 * classes)] = kind == LossKind::cross_entropy_probs ? 0.f : -INFINITY;
            if (with_nan) {
              out[size_t(3 * classes)] = std::nanf("");      // row 3: NaN first: argmax 0
              out[size_t(4 * classes + 5)] = std::nanf("");  // row 4: NaN inside: never chosen
              out[size_t(4 * classes + 6)] = 9.f;
            }
            if (!with_nan && kind == LossKind::cross_entropy_logits)
              std::fill(out.begin() + 2 * classes, out.begin() + 3 * classes, -1.f);
            const LossAndMetrics apart =
                loss_and_metrics(cuda_backend(), false, kind, out, labels, classes, smoothing);
            const LossAndMetrics fused =
                loss_and_metrics(cuda_backend(), true, kind, out, labels, classes, smoothing);
            const LossAndMetrics cpu =
                loss_and_metrics(cpu_backend(), true, kind, out, labels, classes, smoothing);
            CHECK(fused.nonfinite == apart.nonfinite);
            CHECK(fused.nonfinite == cpu.nonfinite);
            CHECK((fused.nonfinite != 0) == !std::isfinite(apart.loss_and_confusion[0]));
            // The confusion matrix: exactly; the loss and its gradient: the same kernel's arithmetic.
            CHECK(std::vector<float>(fused.loss_and_confusion.begin() + 1, fused.loss_and_confusion.end()) ==
                  std::vector<float>(apart.loss_and_confusion.begin() + 1, apart.loss_and_confusion.end()));
            CHECK(std::vector<float>(fused.loss_and_confusion.begin() + 1, fused.loss_and_confusion.end()) ==
                  std::vector<float>(cpu.loss_and_confusion.begin() + 1, cpu.loss_and_confusion.end()));
            if (!with_nan) {
              CHECK(fused.dout == apart.dout);
              CHECK(fused.loss_and_confusion[0] == apart.loss_and_confusion[0]);
              // The CPU sums the rows in another order: the same value to float rounding.
              CHECK(fused.loss_and_confusion[0] == Approx(cpu.loss_and_confusion[0]).epsilon(1e-6));
              CHECK(rel_error(fused.dout, cpu.dout) < 1e-6);
            }
          }
        }
      }
    }
}

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
