// Every row of the loss conformance table (tests/loss_rows.h) on the GPU against the CPU, both
// kernels made through the registry as the executor makes them: batches of 37 (with tied outputs),
// 1,000 and 2,100 rows (past the classification kernel's 2,048 rows a pass) of 7 outputs, run
// twice (accumulating), training and not (class weights), with top-1 and top-3 counts for the
// class rows:
//   dout: relative error < 1e-6; the loss sum: relative 1e-6 (class indices), 1e-5 (values);
//   the top-k counts, the confusion matrix and the binary counts: identical; the regression sums
//   relative < 1e-5; the guard: clear.
// Then a large batch of many classes, the non-finite guard on every row, and a regression and a
// multi-label model trained on gpu:0 against the CPU.
#include <cmath>
#include <sstream>

#include "lib/config/config.h"
#include "lib/losses/losses.h"
#include "lib/train/fit.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/loss_rows.h"
#include "tests/test_loss.h"

using namespace trainer;
using namespace trainer::gpu_test;
using test::LossRow;

namespace {

struct Run {
  std::vector<float> dout, sums;
  float loss = 0;
  uint32_t guard = 0;
};

Run run_on(Backend& be, const std::string& loss_yaml, const test::LossBatch& b, int64_t B, int64_t K,
           std::vector<int64_t> top_k, bool training) {
  test::TestLoss k(be, loss_yaml, K, B, std::move(top_k));
  const size_t n = b.out.size(), m = size_t(k.spec().metric_floats());
  const bool values = k.spec().on_values();
  Buffer ob(be, n * 4), yb(be, (values ? n : size_t(B)) * 4), db(be, n * 4), lb(be, 4), sb(be, m * 4),
      gb(be, sizeof(StepScalars));
  ob.upload(b.out);
  if (values)
    yb.upload(b.values);
  else
    yb.upload(b.labels);
  be.zero(lb.get(), 4);
  be.zero(sb.get(), m * 4);
  be.zero(gb.get(), sizeof(StepScalars));
  for (int rep = 0; rep < 2; ++rep)
    k.run(ob.as(), yb.get(), B, db.as(), lb.as(), sb.as(), training, gb.as<StepScalars>());
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

TEST_CASE("gpu runs every loss row as the CPU does", "[gpu][loss]") {
  const int64_t K = 7;
  for (const LossRow& row : test::loss_rows()) {
    for (int64_t B : {int64_t(37), int64_t(1000), int64_t(2100)}) {
      for (bool training : {false, true}) {
        INFO(row.yaml << ", batch " << B << (training ? ", training" : ""));
        test::LossBatch b = test::loss_batch(row, B, K, uint64_t(B));
        if (B == 37 && !row.on_values()) {  // ties: row 0 all equal, row 1 its label tied with others
          std::fill(b.out.begin(), b.out.begin() + K, row.ref == LossRow::log_probabilities ? -0.5f : 0.5f);
          for (int64_t c = 0; c < K; c += 2) b.out[size_t(K + c)] = row.ref == LossRow::logits ? 2.f : 0.9f;
          b.out[size_t(K + b.labels[1])] = row.ref == LossRow::logits ? 2.f : 0.9f;
          if (row.ref == LossRow::log_probabilities)
            for (int64_t c = 0; c < K; ++c) b.out[size_t(K + c)] = -std::abs(b.out[size_t(K + c)]);
        }
        const std::vector<int64_t> top_k =
            row.on_values() ? std::vector<int64_t>{} : std::vector<int64_t>{1, 3};
        const Run cpu = run_on(cpu_backend(), row.yaml, b, B, K, top_k, training),
                  gpu = run_on(cuda_backend(), row.yaml, b, B, K, top_k, training);
        CHECK(rel_error(gpu.dout, cpu.dout) < 1e-6);
        CHECK(gpu.loss == Approx(cpu.loss).epsilon(row.on_values() ? 1e-5 : 1e-6));
        CHECK(gpu.guard == 0);
        CHECK(cpu.guard == 0);
        if (row.on_values() && row.ref != LossRow::bce)
          CHECK(rel_error(gpu.sums, cpu.sums) < 1e-5);
        else
          CHECK(gpu.sums == cpu.sums);  // whole counts: exact
      }
    }
  }
}

TEST_CASE("gpu loss and metrics handle a large batch with many classes", "[gpu][loss]") {
  const int64_t B = 3000, C = 1000;
  const LossRow row{"cross_entropy", "cross_entropy", LossRow::logits};
  const test::LossBatch b = test::loss_batch(row, B, C, 4);
  const Run cpu = run_on(cpu_backend(), row.yaml, b, B, C, {1, 5}, true),
            gpu = run_on(cuda_backend(), row.yaml, b, B, C, {1, 5}, true);
  CHECK(rel_error(gpu.dout, cpu.dout) < 1e-6);
  CHECK(gpu.loss == Approx(cpu.loss).epsilon(1e-6));
  CHECK(gpu.sums == cpu.sums);
}

TEST_CASE("gpu losses flag a non-finite loss as the CPU does", "[gpu][loss]") {
  const int64_t B = 40, K = 7;
  for (const LossRow& row : test::loss_rows()) {
    INFO(row.yaml);
    test::LossBatch b = test::loss_batch(row, B, K, 9);
    // Probabilities are clipped to [1e-7, 1 - 1e-7] (Keras): a 0 stays finite there.
    const bool clipped = row.ref == LossRow::probabilities;
    // At row 2's label: nll without smoothing reads no other output.
    b.out[size_t(2 * K + (row.on_values() ? 0 : b.labels[2]))] = clipped ? 0.f : NAN;
    const Run cpu = run_on(cpu_backend(), row.yaml, b, B, K, {}, true),
              gpu = run_on(cuda_backend(), row.yaml, b, B, K, {}, true);
    CHECK(gpu.guard == (clipped ? 0u : uint32_t(kNonfiniteLoss)));
    CHECK(cpu.guard == gpu.guard);
    CHECK(std::isfinite(gpu.loss) == clipped);
    if (!row.on_values()) CHECK(gpu.sums == cpu.sums);  // the NaN row's argmax as the CPU takes it
  }
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
