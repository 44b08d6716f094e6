// Model parallelism on the CPU: a model split into stages (model.stages), each stage an executor
// on its own CPU backend, trains to the weights of the unsplit model; micro-batches (GPipe,
// pipeline.micro_batches) give the full batch's gradient; bad splits and combinations are refused
// with the documented errors; a checkpoint of a split run resumes unsplit. The same on GPUs:
// tests/gpu/test_gpu_pipeline.cc.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>

#include "kernels/cpu/cpu_backend.h"
#include "lib/backend/step_kernels.h"
#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/core/rng.h"
#include "lib/dist/thread_world.h"
#include "lib/memory/allocator.h"
#include "lib/train/checkpointing.h"
#include "lib/train/fit.h"
#include "lib/train/session.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;

namespace {

// Dense layers only, and a small CNN without batchnorm (dropout-free, so the runs compare).
const char* kMlp = R"(model:
  input_shape: [6]
  layers:
    - {type: dense, units: 16, name: d1}
    - {type: relu, name: r1}
    - {type: dense, units: 12, name: d2}
    - {type: tanh, name: t2}
    - {type: dense, units: 3, name: out}
optimizer: {type: adam, lr: 0.01}
data: {train: {format: random, samples: 40}, num_classes: 3, batch_size: 10}
train: {seed: 3}
)";

const char* kCnn = R"(model:
  input_shape: [2, 8, 8]
  layers:
    - {type: conv2d, filters: 4, kernel_size: 3, padding: same, name: c1}
    - {type: relu, name: r1}
    - {type: maxpool2d, pool_size: 2, name: p1}
    - {type: conv2d, filters: 6, kernel_size: 3, name: c2}
    - {type: relu, name: r2}
    - {type: flatten, name: f}
    - {type: dense, units: 3, name: out}
optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
data: {train: {format: random, samples: 40}, num_classes: 3, batch_size: 10}
train: {seed: 3}
)";

// A few steps of training through the session's runner; returns the whole model's parameters.
struct Run {
  std::vector<float> params;
  MetricSums sums;
  ClipRecord clip;
};

Run train(const std::string& yaml, std::vector<std::string> sets, int steps = 4, int64_t rows = 10) {
  Config cfg = parse_config(yaml, "pipe.yaml", sets);
  DeviceRequest dev;
  dev.threads = 1;
  auto s = open_session(cfg, dev, {rows}, nullptr, nullptr, /*stages=*/true);
  const int64_t in = cfg.input_shape.numel();
  SplitMix64 rng(17);
  std::vector<float> x(size_t(rows * in));
  std::vector<int32_t> y(static_cast<size_t>(rows));
  StepRunner& r = s->runner();
  r.reset_metrics();
  for (int t = 1; t <= steps; ++t) {
    for (auto& v : x) v = float(rng.next_below(2001)) / 1000.f - 1.f;
    for (auto& v : y) v = int32_t(rng.next_below(3));
    r.train_step(rows, x.data(), y.data(), t, float(cfg.optimizer.lr));
  }
  Run out;
  out.sums = r.read_metrics();
  out.clip = r.read_clip_record();
  out.params.resize(size_t(s->model->param_arena_floats()));
  std::vector<float> buffers(size_t(std::max<int64_t>(s->model->buffer_arena_floats(), 1)));
  r.download_params(out.params.data(), buffers.data());
  return out;
}

// Every parameter within `rel` of the reference, relative to the largest reference magnitude.
void require_close(const std::vector<float>& got, const std::vector<float>& want, double rel) {
  REQUIRE(got.size() == want.size());
  double scale = 0, worst = 0;
  for (float w : want) scale = std::max(scale, double(std::fabs(w)));
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(double(got[i]) - double(want[i])));
  INFO("largest difference " << worst << " against a largest weight of " << scale);
  REQUIRE(worst <= rel * scale);
}

}  // namespace

TEST_CASE("a model split into 2 or 3 stages on the CPU trains to the unsplit model's weights", "[pipeline]") {
  SECTION("MLP") {
    const Run one = train(kMlp, {});
    const Run two = train(kMlp, {"model.stages=[d2]"});
    const Run three = train(kMlp, {"model.stages=[r1, t2]"});
    require_close(two.params, one.params, 1e-5);
    require_close(three.params, one.params, 1e-5);
    REQUIRE(two.sums.samples == one.sums.samples);
    REQUIRE(std::fabs(two.sums.loss_sum - one.sums.loss_sum) <= 1e-5 * std::fabs(one.sums.loss_sum));
    REQUIRE(two.sums.confusion == one.sums.confusion);
  }
  SECTION("MLP with dropout: the masks follow the whole model's layer indices") {
    const std::vector<std::string> drop{"model.layers.1={type: dropout, rate: 0.3, name: r1}"};
    std::vector<std::string> split = drop;
    split.push_back("model.stages=[d2]");
    require_close(train(kMlp, split).params, train(kMlp, drop).params, 1e-5);
  }
  SECTION("CNN, boundaries after a pooling layer and before a flatten") {
    const Run one = train(kCnn, {});
    const Run two = train(kCnn, {"model.stages=[c2]"});
    const Run three = train(kCnn, {"model.stages=[p1, f]"});
    require_close(two.params, one.params, 1e-5);
    require_close(three.params, one.params, 1e-5);
  }
}

TEST_CASE("micro-batches sum to the full batch's gradient, also in uneven parts and across stages",
          "[pipeline]") {
  const Run whole = train(kMlp, {});
  // 10 rows in 4 micro-batches: 2, 3, 2, 3 rows, each weighted by its share.
  require_close(train(kMlp, {"pipeline.micro_batches=4"}).params, whole.params, 1e-5);
  require_close(train(kMlp, {"pipeline.micro_batches=4", "model.stages=[d2, out]"}).params, whole.params,
                1e-5);
  // More micro-batches than rows: one row each.
  require_close(train(kMlp, {"pipeline.micro_batches=16"}, 3, 5).params, train(kMlp, {}, 3, 5).params, 1e-5);
  const Run cnn = train(kCnn, {});
  require_close(train(kCnn, {"pipeline.micro_batches=3", "model.stages=[p1]"}).params, cnn.params, 1e-5);
  // The loss and the metrics are of every micro-batch.
  const Run mb = train(kMlp, {"pipeline.micro_batches=4"});
  REQUIRE(mb.sums.samples == whole.sums.samples);
  REQUIRE(std::fabs(mb.sums.loss_sum - whole.sums.loss_sum) <= 1e-5 * std::fabs(whole.sums.loss_sum));
}

TEST_CASE("clip_grad_norm clips by the norm over every stage's gradients, as the unsplit model does",
          "[pipeline]") {
  // lr 0.01 and max norm 0.05: every step is clipped.
  const std::vector<std::string> clip{"clip_grad_norm=0.05"};
  const Run whole = train(kMlp, clip);
  REQUIRE(whole.clip.clipped_steps == 4);
  auto with = [&](std::vector<std::string> sets) {
    sets.insert(sets.end(), clip.begin(), clip.end());
    const Run r = train(kMlp, sets);
    REQUIRE(r.clip.clipped_steps == 4);
    REQUIRE(std::fabs(r.clip.last_norm - whole.clip.last_norm) <= 1e-5 * whole.clip.last_norm);
    return r.params;
  };
  require_close(with({"model.stages=[d2]"}), whole.params, 1e-5);
  require_close(with({"model.stages=[r1, out]", "pipeline.micro_batches=3"}), whole.params, 1e-5);
  require_close(with({"pipeline.micro_batches=2"}), whole.params, 1e-5);
  // Without clipping the weights differ: the bound above is not loose.
  const Run free = train(kMlp, {});
  double diff = 0;
  for (size_t i = 0; i < free.params.size(); ++i)
    diff = std::max(diff, std::fabs(double(free.params[i]) - double(whole.params[i])));
  REQUIRE(diff > 1e-3);
}

TEST_CASE("clipping in two phases: one group is clip_grad_norm bit for bit, groups add up to the whole",
          "[pipeline][clip]") {
  CpuBackend be(0, 1);
  const std::unique_ptr<ClipKernel> clip = StepKernelRegistry::global().clip(be, 0.5f);
  const std::vector<float> g = test::random_vector(10000, 9);
  std::vector<double> partials(2 * kClipPartials);
  std::vector<float> a = g, b = g;
  ClipRecord ra, rb;
  clip->clip(a.data(), int64_t(a.size()), partials.data(), &ra);
  clip->sum_squares(b.data(), int64_t(b.size()), partials.data());
  clip->by_partials(b.data(), int64_t(b.size()), partials.data(), 1, &rb);
  REQUIRE(a == b);
  REQUIRE(ra.last_norm == rb.last_norm);
  REQUIRE(rb.clipped_steps == 1);
  // The arena in two parts (two stages): the same norm and factor, up to the order of the sums.
  std::vector<float> c = g;
  ClipRecord rc;
  clip->sum_squares(c.data(), 3000, partials.data());
  clip->sum_squares(c.data() + 3000, 7000, partials.data() + kClipPartials);
  clip->by_partials(c.data(), 3000, partials.data(), 2, &rc);
  REQUIRE(std::fabs(rc.last_norm - ra.last_norm) <= 1e-6f * ra.last_norm);
  REQUIRE(std::fabs(rc.last_scale - ra.last_scale) <= 1e-6f * ra.last_scale);
}

TEST_CASE("bad model.stages are config errors naming the layers", "[pipeline][config]") {
  DeviceRequest dev;
  SECTION("an unknown layer name, with the closest one") {
    Config cfg = parse_config(kMlp, "pipe.yaml", {"model.stages=[d3]"});
    REQUIRE_THROWS_WITH(make_model(cfg), Contains("model.stages: no layer is named 'd3'") &&
                                             Contains("did you mean") && Contains("d1, r1, d2, t2, out"));
  }
  SECTION("the first layer, a repeat, out of order") {
    REQUIRE_THROWS_WITH(make_model(parse_config(kMlp, "p.yaml", {"model.stages=[d1]"})),
                        Contains("'d1' is the first layer"));
    REQUIRE_THROWS_WITH(make_model(parse_config(kMlp, "p.yaml", {"model.stages=[d2, d2]"})),
                        Contains("'d2' comes twice"));
    REQUIRE_THROWS_WITH(make_model(parse_config(kMlp, "p.yaml", {"model.stages=[t2, d2]"})),
                        Contains("'d2' comes before 't2'"));
  }
  SECTION("a skip connection across a boundary") {
    const char* residual = R"(model:
  input_shape: [4]
  layers:
    - {type: dense, units: 4, name: a}
    - {type: relu, name: b}
    - {type: dense, units: 4, name: c}
    - {type: add, inputs: [a, c], name: sum}
    - {type: dense, units: 2, name: out}
data: {train: {format: random, samples: 10}, num_classes: 2}
)";
    REQUIRE_NOTHROW(make_model(parse_config(residual, "r.yaml", {"model.stages=[out]"})));
    REQUIRE_THROWS_AS(make_model(parse_config(residual, "r.yaml", {"model.stages=[c]"})), ConfigError);
    REQUIRE_THROWS_WITH(make_model(parse_config(residual, "r.yaml", {"model.stages=[c]"})),
                        Contains("layer 'sum' (stage 2) takes the output of 'a' from an earlier stage"));
  }
  SECTION("an unknown key of pipeline") {
    REQUIRE_THROWS_WITH(parse_config(kMlp, "p.yaml", {"pipeline.micro_batch=2"}),
                        Contains("unknown key 'pipeline.micro_batch'") && Contains("micro_batches"));
  }
}

TEST_CASE("stages are refused with data parallelism and loss scaling", "[pipeline]") {
  SECTION("data parallel replicas (exit 2)") {
    ThreadHub hub(2, "replica", "2 test replicas");
    ThreadRank rank(hub, 0);
    Config cfg = parse_config(kMlp, "pipe.yaml", {"model.stages=[d2]"});
    REQUIRE_THROWS_AS(open_session(cfg, DeviceRequest{}, {5}, nullptr, &rank, true), UsageError);
    REQUIRE_THROWS_WITH(open_session(cfg, DeviceRequest{}, {5}, nullptr, &rank, true),
                        Contains("cannot be combined with data parallelism"));
  }
  SECTION("a fixed loss scale over several stages") {
    Config cfg = parse_config(kMlp, "pipe.yaml", {"model.stages=[d2]", "train.loss_scale=1024"});
    REQUIRE_THROWS_WITH(open_session(cfg, DeviceRequest{}, {10}, nullptr, nullptr, true),
                        Contains("loss scaling") && Contains("model.stages"));
  }
}

TEST_CASE("the command line refuses stages with several GPUs' data parallelism (exit 2)", "[pipeline][cli]") {
  const std::string dir = test::temp_dir("pipe_cli");
  const std::string cfg = test::write_file(dir, "mlp.yaml", kMlp);
  auto r = test::run_trainer("fit " + cfg + " --no-out --device gpu:0,1 --set pipeline.micro_batches=2");
  REQUIRE(r.exit_code == 2);
  REQUIRE_THAT(r.err, Contains("without model.stages"));
  r = test::run_trainer("fit " + cfg + " --no-out --set model.stages=[dd2]");
  REQUIRE(r.exit_code == 3);
  REQUIRE_THAT(r.err, Contains("no layer is named 'dd2' (did you mean 'd2'?)"));
  r = test::run_trainer("fit " + cfg + " --no-out --epochs 1 --set model.stages=[d2,out]");
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.err, Contains("model parallel: 3 stage(s) on cpu, cpu, cpu"));
  REQUIRE_THAT(r.err, Contains("stage 2/3: layers 3-4 (d2 .. t2)"));
  REQUIRE_THAT(r.err, Contains("MiB reserved on the device (cpu: "));
  REQUIRE_THAT(r.err, Contains("for its 3 stages)"));
  // A split run's directory: eval loads it on one device; --resume goes on unsplit.
  r = test::run_trainer("fit " + cfg + " --out " + dir + "/run --epochs 1 --set model.stages=[d2]");
  REQUIRE(r.exit_code == 0);
  r = test::run_trainer("eval " + dir + "/run --split train");
  REQUIRE(r.exit_code == 0);
  r = test::run_trainer("fit --resume " + dir + "/run --epochs 2 --set 'model.stages=[]'");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  REQUIRE_THAT(r.err, !Contains("model parallel"));
  REQUIRE_THAT(r.out, Contains("epoch 2/2"));
}

TEST_CASE("a checkpoint of a 2-stage run resumes at 1 stage, where the unsplit run would be", "[pipeline]") {
  const std::string dir = test::temp_dir("pipe_resume");
  std::ostringstream out;
  auto run = [&](const std::string& name, std::vector<std::string> sets, bool resume) {
    Config cfg = parse_config(kMlp, "pipe.yaml", sets);
    FitOptions fo;
    fo.device.threads = 1;
    (resume ? fo.resume_dir : fo.out_dir) = dir + "/" + name;
    return fit(cfg, fo, out);
  };
  run("split", {"train.epochs=2", "model.stages=[d2]", "pipeline.micro_batches=2"}, false);
  const FitResult resumed = run("split", {"train.epochs=4"}, true);  // no stages: one executor
  run("whole", {"train.epochs=4"}, false);
  REQUIRE(resumed.epochs_run == 4);
  const Config plain = parse_config(kMlp, "p.yaml", {});
  const Model model(plain.input_shape, plain.layers, InitScheme::torch, "p.yaml");
  const HostWeights a = load_weights(dir + "/split/model.safetensors", model, "split");
  const HostWeights b = load_weights(dir + "/whole/model.safetensors", model, "whole");
  require_close(a.params, b.params, 1e-5);
}

TEST_CASE("each stage reserves its own layers' parameter memory, which falls as stages are added",
          "[pipeline]") {
  auto stage_bytes = [](const std::string& stages) {
    Config cfg = parse_config(kCnn, "pipe.yaml", {"model.stages=" + stages});
    auto s = open_session(cfg, DeviceRequest{}, {10}, nullptr, nullptr, true);
    std::vector<size_t> bytes;
    for (size_t k = 0; k < s->pipeline->stage_count(); ++k)
      bytes.push_back(s->pipeline->executor(k).parameter_bytes());
    return bytes;
  };
  Config whole_cfg = parse_config(kCnn, "pipe.yaml", {"pipeline.micro_batches=1"});
  auto whole = open_session(whole_cfg, DeviceRequest{}, {10}, nullptr, nullptr, true);
  const size_t one = whole->executor->parameter_bytes();
  const std::vector<size_t> two = stage_bytes("[c2]"), three = stage_bytes("[p1, f]");
  REQUIRE(two.size() == 2);
  REQUIRE(three.size() == 3);
  const size_t max2 = *std::max_element(two.begin(), two.end());
  const size_t max3 = *std::max_element(three.begin(), three.end());
  INFO("parameter bytes per device: 1 stage " << one << ", 2 stages at most " << max2 << ", 3 stages at most "
                                              << max3);
  REQUIRE(max2 < one);
  REQUIRE(max3 < one);
  REQUIRE(max3 <= max2);
}

TEST_CASE("micro-batches sum their gradients in the arena through a scratch of the largest layer's size",
          "[pipeline]") {
  auto bytes = [](const std::vector<std::string>& sets) {
    Config cfg = parse_config(kCnn, "pipe.yaml", sets);
    auto s = open_session(cfg, DeviceRequest{}, {10}, nullptr, nullptr, true);
    std::vector<size_t> b;
    if (!s->pipeline)
      return std::vector<size_t>{s->executor->parameter_bytes()};  // one stage, one micro-batch
    for (size_t k = 0; k < s->pipeline->stage_count(); ++k)
      b.push_back(s->pipeline->executor(k).parameter_bytes());
    return b;
  };
  // kCnn's largest layer is c2: 6 x 4 x 3 x 3 weights and 6 biases, each tensor aligned as in the arena.
  const size_t scratch = align_up(216 * sizeof(float)) + align_up(6 * sizeof(float));
  const std::vector<size_t> one = bytes({"pipeline.micro_batches=1"}),
                            four = bytes({"pipeline.micro_batches=4"});
  REQUIRE(one.size() == 1);
  REQUIRE(four.size() == 1);
  CHECK(four[0] == one[0] + scratch);
  // Two stages: each adds the scratch of its own largest layer (c1's 72 + 4 floats; c2).
  const std::vector<size_t> split1 = bytes({"model.stages=[c2]", "pipeline.micro_batches=1"}),
                            split4 = bytes({"model.stages=[c2]", "pipeline.micro_batches=4"});
  REQUIRE(split4.size() == 2);
  CHECK(split4[0] == split1[0] + align_up(72 * sizeof(float)) + align_up(4 * sizeof(float)));
  CHECK(split4[1] == split1[1] + scratch);
}
