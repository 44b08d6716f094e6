// Model parallelism on GPUs (lib/model/pipeline.h): the stages' boundary tensors go between
// backends by device copies ordered with events.
//   - one GPU (every GPU machine runs it): 2 stages on gpu:0, each with its own backend and
//     stream, train like the unsplit model on gpu:0 (rel 1e-5), also with 4 micro-batches, and
//     with clip_grad_norm (the norm over both stages); with batchnorms taking their
//     convolutions' biases, 4 micro-batches on gpu:0 train like on the CPU (rel 1e-4);
//   - two GPUs (skipped, visibly, with fewer): 2 stages on gpu:0,1 (peer copies) train like one
//     stage on gpu:0 (rel 1e-5), with 1 and 4 micro-batches; fit with model.stages over gpu:0,1
//     tracks fit on gpu:0 (rel 1e-4 of the final losses).
#include <sstream>

#include "lib/config/config.h"
#include "lib/core/rng.h"
#include "lib/train/fit.h"
#include "lib/train/session.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;

namespace {

const char* kCnn = R"(model:
  input_shape: [3, 16, 16]
  layers:
    - {type: conv2d, filters: 16, kernel_size: 3, padding: same, name: c1}
    - {type: relu, name: r1}
    - {type: maxpool2d, pool_size: 2, name: p1}
    - {type: conv2d, filters: 32, kernel_size: 3, padding: same, name: c2}
    - {type: relu, name: r2}
    - {type: flatten, name: f}
    - {type: dense, units: 64, name: d1}
    - {type: relu, name: r3}
    - {type: dense, units: 8, name: out}
optimizer: {type: adam, lr: 0.001}
data: {train: {format: random, samples: 64}, num_classes: 8, batch_size: 32}
train: {seed: 7}
)";

// Convolutions with biases before batchnorms, which the GPU folds: each batchnorm writes its
// convolution's bias gradient, into the micro-batch gradient scratch with micro-batches. SGD, so
// that a gradient of rounding noise (the CPU's unfolded bias) moves nothing measurably.
const char* kBnNet = R"(model:
  input_shape: [3, 16, 16]
  layers:
    - {type: conv2d, filters: 16, kernel_size: 3, padding: same, name: c1}
    - {type: batchnorm, name: bn1}
    - {type: relu, name: r1}
    - {type: maxpool2d, pool_size: 2, name: p1}
    - {type: conv2d, filters: 32, kernel_size: 3, padding: same, name: c2}
    - {type: batchnorm, name: bn2}
    - {type: relu, name: r2}
    - {type: flatten, name: f}
    - {type: dense, units: 8, name: out}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
data: {train: {format: random, samples: 64}, num_classes: 8, batch_size: 32}
train: {seed: 7}
)";

// Five steps of 32 rows through the session's runner on `device`; the whole model's parameters.
// folded: the biases the stages' batchnorms took (Executor::folded_biases).
std::vector<float> train(const std::string& device, std::vector<std::string> sets, const char* yaml = kCnn,
                         int* folded = nullptr) {
  Config cfg = parse_config(yaml, "pipe.yaml", sets);
  DeviceRequest dev;
  dev.device = device;
  dev.deterministic = true;
  auto s = open_session(cfg, dev, {32}, nullptr, nullptr, /*stages=*/true);
  if (folded) {
    *folded = 0;
    if (!s->pipeline) *folded = s->executor->folded_biases();
    for (size_t k = 0; s->pipeline && k < s->pipeline->stage_count(); ++k)
      *folded += s->pipeline->executor(k).folded_biases();
  }
  StepRunner& r = s->runner();
  SplitMix64 rng(11);
  std::vector<float> x(size_t(32 * cfg.input_shape.numel()));
  std::vector<int32_t> y(32);
  for (int t = 1; t <= 5; ++t) {
    for (auto& v : x) v = float(rng.next_below(2001)) / 1000.f - 1.f;
    for (auto& v : y) v = int32_t(rng.next_below(8));
    r.train_step(32, x.data(), y.data(), t, 0.001f);
  }
  std::vector<float> params(size_t(s->model->param_arena_floats())),
      buffers(size_t(std::max<int64_t>(s->model->buffer_arena_floats(), 1)));
  r.download_params(params.data(), buffers.data());
  return params;
}

}  // namespace

TEST_CASE("gpu pipeline: 2 stages on one GPU train like the unsplit model", "[gpu][pipeline]") {
  const std::vector<float> one = train("gpu:0", {});
  const double e = rel_error(train("gpu:0", {"model.stages=[c2]"}), one);
  INFO("2 stages on gpu:0 vs 1: parameter rel error " << e);
  CHECK(e < 1e-5);
  const double m = rel_error(train("gpu:0", {"model.stages=[c2]", "pipeline.micro_batches=4"}), one);
  INFO("2 stages, 4 micro-batches on gpu:0 vs 1 stage: parameter rel error " << m);
  CHECK(m < 1e-5);
}

TEST_CASE("gpu pipeline: micro-batches sum the gradients of folded biases as the CPU sums unfolded ones",
          "[gpu][pipeline]") {
  const std::vector<std::string> sets = {"model.stages=[c2]", "pipeline.micro_batches=4"};
  int folded = -1;
  const std::vector<float> gpu = train("gpu:0", sets, kBnNet, &folded);
  const std::vector<float> cpu = train("cpu", sets, kBnNet);
  CHECK(folded == 2);
  const double e = rel_error(gpu, cpu);
  INFO("2 stages, 4 micro-batches, batchnorm taking the biases: gpu:0 vs cpu parameter rel error " << e);
  CHECK(e < 1e-4);
}

TEST_CASE("gpu clipping in two phases: one group is clip_grad_norm bit for bit; two groups match the CPU's",
          "[gpu][pipeline][clip]") {
  CudaBackend& be = cuda_backend();
  const std::unique_ptr<ClipKernel> clip = StepKernelRegistry::global().clip(be, 0.5f),
                                    cpu_clip = StepKernelRegistry::global().clip(cpu_backend(), 0.5f);
  const std::vector<float> g = random_vector(100000, 9);
  Buffer a(be, g.size() * sizeof(float)), b(be, g.size() * sizeof(float));
  Buffer partials(be, 2 * kClipPartials * sizeof(double)), ra(be, sizeof(ClipRecord)),
      rb(be, sizeof(ClipRecord));
  const ClipRecord none;
  a.upload(g);
  b.upload(g);
  ra.upload(std::vector<ClipRecord>{none});
  rb.upload(std::vector<ClipRecord>{none});
  const int64_t n = int64_t(g.size());
  clip->clip(a.as(), n, partials.as<double>(), ra.as<ClipRecord>());
  clip->sum_squares(b.as(), n, partials.as<double>());
  clip->by_partials(b.as(), n, partials.as<double>(), 1, rb.as<ClipRecord>());
  CHECK(a.download(g.size()) == b.download(g.size()));
  const ClipRecord one = ra.download<ClipRecord>(1)[0];
  CHECK(one.last_norm == rb.download<ClipRecord>(1)[0].last_norm);
  // Two groups (the arena split at 30000) against the CPU's two phases.
  b.upload(g);
  rb.upload(std::vector<ClipRecord>{none});
  clip->sum_squares(b.as(), 30000, partials.as<double>());
  clip->sum_squares(b.as() + 30000, n - 30000, partials.as<double>() + kClipPartials);
  clip->by_partials(b.as(), 30000, partials.as<double>(), 2, rb.as<ClipRecord>());
  std::vector<float> c = g;
  std::vector<double> host(2 * kClipPartials);
  ClipRecord rc;
  cpu_clip->sum_squares(c.data(), 30000, host.data());
  cpu_clip->sum_squares(c.data() + 30000, n - 30000, host.data() + kClipPartials);
  cpu_clip->by_partials(c.data(), 30000, host.data(), 2, &rc);
  const ClipRecord two = rb.download<ClipRecord>(1)[0];
  INFO("norm: one group " << one.last_norm << ", two on the GPU " << two.last_norm << ", two on the CPU "
                          << rc.last_norm);
  CHECK(std::abs(two.last_norm - rc.last_norm) <= 1e-6f * rc.last_norm);
  CHECK(std::abs(two.last_norm - one.last_norm) <= 1e-6f * one.last_norm);
  CHECK(rel_error(std::vector<float>(b.download(30000)), std::vector<float>(c.begin(), c.begin() + 30000)) <
        1e-6);
}

TEST_CASE("gpu pipeline: clip_grad_norm over 2 stages on one GPU clips by the whole model's norm",
          "[gpu][pipeline]") {
  const std::vector<float> one = train("gpu:0", {"clip_grad_norm=0.01"});
  const double e = rel_error(train("gpu:0", {"model.stages=[d1]", "clip_grad_norm=0.01"}), one);
  INFO("2 stages with clip_grad_norm on gpu:0 vs 1: parameter rel error " << e);
  CHECK(e < 1e-5);
}

TEST_CASE("gpu pipeline: 2 stages on gpu:0,1 train like one stage on gpu:0", "[gpu][pipeline][2gpu]") {
  if (!have_two_gpus()) return;
  const std::vector<float> one = train("gpu:0", {});
  const double e = rel_error(train("gpu:0,1", {"model.stages=[c2]"}), one);
  INFO("2 stages on gpu:0,1 vs 1 on gpu:0: parameter rel error " << e);
  CHECK(e < 1e-5);
  const double m = rel_error(train("gpu:0,1", {"model.stages=[f]", "pipeline.micro_batches=4"}), one);
  INFO("2 stages, 4 micro-batches on gpu:0,1 vs 1 stage on gpu:0: parameter rel error " << m);
  CHECK(m < 1e-5);
}

TEST_CASE("gpu fit with model.stages over gpu:0,1 tracks fit on gpu:0", "[gpu][pipeline][2gpu][fit]") {
  if (!have_two_gpus()) return;
  const char* yaml = R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 64, name: a}, {type: relu}, {type: dense, units: 64, name: b}, {type: relu},
           {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9}
data: {train: {format: disc, samples: 300}, num_classes: 2, batch_size: 32, validation_split: 0.2}
train: {epochs: 3, seed: 5}
)";
  FitOptions fo;
  fo.device.device = "gpu:0";
  fo.device.deterministic = true;
  std::ostringstream out1, out2;
  const FitResult one = fit(parse_config(yaml, "fit.yaml", {}), fo, out1);
  fo.device.device = "gpu:0,1";
  const FitResult two =
      fit(parse_config(yaml, "fit.yaml", {"model.stages=[b]", "pipeline.micro_batches=2"}), fo, out2);
  INFO("final train loss 1 GPU " << one.final_train_loss << ", 2 stages " << two.final_train_loss);
  CHECK(two.epochs_run == 3);
  CHECK(std::abs(two.final_train_loss - one.final_train_loss) <= 1e-4 * one.final_train_loss);
  CHECK(std::abs(two.final_val_loss - one.final_val_loss) <= 1e-4 * one.final_val_loss);
  CHECK(two.final_val_accuracy == one.final_val_accuracy);
}
