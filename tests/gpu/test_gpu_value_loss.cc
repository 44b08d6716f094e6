// The losses on float targets on the GPU (kernels/cuda/value_loss.cu) against the CPU's
// (kernels/cpu/value_loss_cpu.cc): gradients, the loss sum twice accumulated, the metric sums
// (binary counts and score histograms exactly), the non-finite guard; then a regression and a
// multi-label model trained on gpu:0 against the CPU.
#include <sstream>

#include "lib/config/config.h"
#include "lib/losses/losses.h"
#include "lib/train/fit.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;

namespace {

struct Run {
  std::vector<float> dout, sums;
  float loss = 0;
  uint32_t guard = 0;
};

Run run_on(Backend& be, const ValueLossSpec& spec0, const std::vector<float>& o, const std::vector<float>& y,
           int64_t B) {
  ValueLossSpec spec = spec0;
  spec.backend = &be;
  auto k = LossRegistry::global().make_kernel(be.name(), spec);
  Buffer scratch(be, std::max<size_t>(k->scratch_bytes(), 1));
  if (k->scratch_bytes()) k->bind(scratch.get());
  const size_t n = o.size(), m = size_t(spec.metric_floats());
  Buffer ob(be, n * 4), yb(be, n * 4), db(be, n * 4), lb(be, 4), sb(be, m * 4), gb(be, sizeof(StepScalars));
  ob.upload(o);
  yb.upload(y);
  be.zero(lb.get(), 4);
  be.zero(sb.get(), m * 4);
  be.zero(gb.get(), sizeof(StepScalars));
  for (int rep = 0; rep < 2; ++rep)
    k->run(ob.as(), yb.as(), B, db.as(), lb.as(), gb.as<StepScalars>(), kNonfiniteLoss, sb.as());
  Run r;
  r.dout = db.download(n);
  r.sums = sb.download(m);
  r.loss = lb.download(1)[0];
  StepScalars s;
  be.copy_to_host(&s, gb.get(), sizeof s);
  r.guard = s.nonfinite;
  return r;
}

}  // namespace

TEST_CASE("gpu losses on values match the CPU", "[gpu][loss][values]") {
  const int64_t B = 1000, K = 3;
  struct Case {
    ValueLoss f;
    float delta, scale;
    std::vector<float> pw;
  };
  for (const Case& c :
       {Case{ValueLoss::mse, 1.f, 1.f, {}}, Case{ValueLoss::mae, 1.f, 1.f, {}},
        Case{ValueLoss::huber, 0.7f, 1.f, {}}, Case{ValueLoss::huber, 0.5f, 2.f, {}},
        Case{ValueLoss::bce_logits, 1.f, 1.f, {}}, Case{ValueLoss::bce_logits, 1.f, 1.f, {2.f, 0.5f, 1.f}}}) {
    INFO("formula " << int(c.f) << " delta " << c.delta);
    ValueLossSpec spec;
    spec.formula = c.f;
    spec.width = K;
    spec.max_batch = B;
    spec.delta = c.delta;
    spec.scale = c.scale;
    spec.pos_weight = c.pw;
    spec.binary_metrics = c.f == ValueLoss::bce_logits;
    std::vector<float> o = random_vector(size_t(B * K), 21, -4.f, 4.f),
                       y = random_vector(size_t(B * K), 22, -3.f, 3.f);
    if (spec.binary_metrics)
      for (float& v : y) v = v > 0 ? 1.f : 0.f;
    const Run cpu = run_on(cpu_backend(), spec, o, y, B), gpu = run_on(cuda_backend(), spec, o, y, B);
    REQUIRE(rel_error(gpu.dout, cpu.dout) < 1e-6);
    REQUIRE(gpu.loss == Approx(cpu.loss).epsilon(1e-5));
    REQUIRE(gpu.guard == 0);
    if (spec.binary_metrics) {
      REQUIRE(gpu.sums == cpu.sums);  // whole counts: exact
    } else {
      REQUIRE(rel_error(gpu.sums, cpu.sums) < 1e-5);
    }
  }
}

TEST_CASE("gpu loss on values flags a non-finite loss", "[gpu][loss][values]") {
  ValueLossSpec spec;
  spec.formula = ValueLoss::mse;
  spec.width = 1;
  spec.max_batch = 4;
  std::vector<float> o{1.f, NAN, 2.f, 3.f}, y{0.f, 0.f, 0.f, 0.f};
  REQUIRE(run_on(cuda_backend(), spec, o, y, 4).guard == kNonfiniteLoss);
}

TEST_CASE("gpu trains regression and multi-label models as the CPU does", "[gpu][values][e2e]") {
  for (const std::string loss : {"mse", "binary_cross_entropy"}) {
    INFO(loss);
    const std::string yaml =
        "model:\n  input_shape: [8]\n  layers: [{type: dense, units: 16}, {type: relu}, {type: dense, units: "
        "3}]\n"
        "loss: " +
        loss +
        "\noptimizer: {type: sgd, lr: 0.05}\n"
        "data: {train: {format: random, samples: 512, seed: 3}, batch_size: 64, validation_split: 0.25}\n"
        "train: {epochs: 3, seed: 1}\n";
    std::ostringstream o1, o2;
    FitOptions cpu, gpu;
    cpu.device.device = "cpu";
    gpu.device.device = "gpu:0";
    gpu.device.deterministic = true;
    const FitResult a = fit(parse_config(yaml, "t.yaml", {}), cpu, o1),
                    b = fit(parse_config(yaml, "t.yaml", {}), gpu, o2);
    INFO(o1.str() << o2.str());
    REQUIRE(b.final_train_loss == Approx(a.final_train_loss).epsilon(1e-4));
    REQUIRE(b.final_val_loss == Approx(a.final_val_loss).epsilon(1e-4));
  }
}

TEST_CASE("gpu class weights match the CPU's", "[gpu][loss]") {
  const int64_t B = 300, C = 7;
  std::vector<int32_t> y(static_cast<size_t>(B));
  for (int64_t i = 0; i < B; ++i) y[size_t(i)] = int32_t((i * 5 + 3) % C);
  const std::vector<float> w{0.5f, 2.f, 1.f, 3.f, 0.25f, 1.5f, 4.f};
  for (LossKind kind : {LossKind::nll, LossKind::cross_entropy_logits, LossKind::cross_entropy_probs}) {
    for (float smoothing : {0.f, 0.1f}) {
      INFO("kind " << int(kind) << " smoothing " << smoothing);
      std::vector<float> out = random_vector(size_t(B * C), 31, -3.f, 3.f);
      if (kind == LossKind::nll)
        for (auto& v : out) v = -std::abs(v) - 0.1f;
      if (kind == LossKind::cross_entropy_probs)
        for (auto& v : out) v = 0.05f + 0.9f * (v + 3.f) / 6.f;
      std::vector<float> d_cpu(out.size());
      float l_cpu = 0;
      cpu_backend().loss(kind, out.data(), y.data(), B, C, d_cpu.data(), &l_cpu, smoothing, w.data());
      CudaBackend& be = cuda_backend();
      Buffer ob(be, out.size() * 4), yb(be, y.size() * 4), db(be, out.size() * 4), lb(be, 4),
          wb(be, w.size() * 4);
      ob.upload(out);
      yb.upload(y);
      wb.upload(w);
      be.zero(lb.get(), 4);
      be.loss(kind, ob.as(), yb.as<int32_t>(), B, C, db.as(), lb.as(), smoothing, wb.as());
      REQUIRE(rel_error(db.download(out.size()), d_cpu) < 1e-6);
      REQUIRE(lb.download(1)[0] == Approx(l_cpu).epsilon(1e-6));
    }
  }
}
