// Synchronized batchnorm on GPUs (device.sync_batchnorm; lib/core/batchnorm_sync_formula.h): the
// batchnorm kernels all-reduce their per-channel sums through the replicas' NCCL collective on the
// backend's stream, inside the recorded step.
//   - one GPU (the degenerate case every GPU machine runs): with a one-replica collective, the
//     synchronized kernels train like the unsynchronized ones (rel 1e-6: the same sums, finished
//     by other kernels), weights and running statistics, in fp32, bf16 and fp16 (channels-last
//     activations), and the steps are still recorded as CUDA graphs;
//   - two GPUs (skipped, visibly, with fewer): two replicas on the halves of every batch end with
//     gpu:0's weights and running statistics on the whole batches: fp32 within rel 1e-5; bf16 and
//     fp16 (channels-last between convolution and batchnorm) within twice the dtype's own error
//     (gpu:0 in the dtype against gpu:0 in fp32; see the case);
//     uneven shards (a last batch of 5 rows: 2 and 3) and an empty one (a last batch of 1 row:
//     replica 0 has none, and still makes every batchnorm all-reduce, between gradient buckets
//     launched during the backward pass exactly where replica 1 launches them); both replicas end
//     with the same bits; without sync the same comparison fails clearly; fit over gpu:0,1 with
//     device.sync_batchnorm tracks fit on gpu:0.
// Cases that need NCCL print SKIPPED in a build without it.
#include <functional>
#include <sstream>
#include <thread>

#include "lib/config/config.h"
#include "lib/core/shard.h"
#include "lib/dist/thread_world.h"
#include "lib/model/executor.h"
#include "lib/train/data_parallel.h"
#include "lib/train/fit.h"
#include "lib/train/fit_replicas.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/two_replicas.h"

using namespace trainer;
using namespace trainer::gpu_test;

namespace {

// conv -> batchnorm -> relu, twice (16 channels: channels-last in bf16 and fp16), then a batchnorm
// over dense features.
const char* kNet = R"(model:
  input_shape: [3, 12, 12]
  layers:
    - {type: conv2d, filters: 16, kernel_size: 3, padding: same}
    - {type: batchnorm}
    - {type: relu}
    - {type: conv2d, filters: 16, kernel_size: 3}
    - {type: batchnorm, momentum: 0.3}
    - {type: relu}
    - {type: maxpool2d}
    - {type: flatten}
    - {type: dense, units: 32}
    - {type: batchnorm}
    - {type: relu}
    - {type: dense, units: 8}
data: {train: {format: random}, num_classes: 8}
)";

constexpr int64_t kSteps = 5;

struct RunOptions {
  bool sync = true;         // ExecutorOptions::sync_batchnorm (with a collective)
  size_t bucket_bytes = 0;  // 1: a gradient bucket per layer, launched during the backward pass
  int64_t tail_rows = 5;    // the last step's rows (the others: 16)
  MathMode math = MathMode::strict_fp32;
  bool loss_scaling = false;
};

struct Trained {
  std::vector<float> params, buffers;
  size_t graphs = 0;  // CUDA graphs recorded
};

bool have_nccl(Backend& be) {
  if (be.collectives_unavailable().empty()) return true;
  std::cout << "SKIPPED: " << be.collectives_unavailable() << "\n";
  return false;
}

// Replica `rank` of `ranks` trains kSteps steps on its shard of every global batch (collective
// null: one GPU, unsynchronized, on the whole batches).
Trained train(Backend& be, const Model& model, DeviceCollective* collective, Communicator* comm, int rank,
              int ranks, const RunOptions& ro) {
  const Optimizer opt(make_optimizer("{type: sgd, lr: 0.05, momentum: 0.9}"));
  ExecutorOptions o;
  o.batch_sizes = shard_batch_sizes({16, ro.tail_rows}, ranks);
  o.num_classes = 8;
  o.loss = loss_config("cross_entropy");
  o.seed = 42;
  o.deterministic = true;
  o.comm = comm;
  o.collective = collective;
  o.sync_batchnorm = ro.sync && collective;
  o.bucket_bytes = ro.bucket_bytes;
  o.math = ro.math;
  o.loss_scaling = ro.loss_scaling;
  Executor ex(model, be, opt, o);
  Trained out;
  out.params.resize(size_t(model.param_arena_floats()));
  out.buffers.resize(size_t(model.buffer_arena_floats()));
  model.initialize(out.params.data(), out.buffers.data(), 7);
  ex.upload_params(out.params.data(), out.buffers.data());
  const int64_t in = model.input_shape().numel();
  auto* cuda = dynamic_cast<CudaBackend*>(&be);
  const size_t graphs_before = cuda ? cuda->graph_count() : 0;
  for (int64_t t = 1; t <= kSteps; ++t) {
    const int64_t rows = t == kSteps ? ro.tail_rows : 16;
    const std::vector<float> x = random_vector(size_t(rows * in), 1000 + uint64_t(t));
    SplitMix64 rng = SplitMix64::counter(uint64_t(t));
    std::vector<int32_t> y(static_cast<size_t>(rows));
    for (auto& v : y) v = int32_t(rng.next_u64() % 8);
    const Shard sh = shard_of(rows, rank, ranks);
    ex.train_step(sh.rows, x.data() + sh.begin * in, y.data() + sh.begin, t, 0.05f, rows);
  }
  if (cuda) out.graphs = cuda->graph_count() - graphs_before;
  ex.download_params(out.params.data(), out.buffers.data());
  return out;
}

std::vector<Trained> train_two(const Model& model, const RunOptions& ro) {
  std::vector<Trained> got(2);
  const std::vector<std::string> errors =
      on_two_replicas([&](CudaBackend& be, DeviceCollective& dc, Communicator& comm, int r) {
        got[size_t(r)] = train(be, model, &dc, &comm, r, 2, ro);
      });
  INFO("replica 0: " << errors[0] << "; replica 1: " << errors[1]);
  REQUIRE(errors[0].empty());
  REQUIRE(errors[1].empty());
  return got;
}

Model make_model() {
  const Config c = parse_config(kNet, "syncbn.yaml", {});
  return Model(c.input_shape, c.layers, c.init, c.file);
}

}  // namespace

TEST_CASE("gpu sync batchnorm with a one-replica NCCL collective trains like unsynchronized batchnorm",
          "[gpu][nccl][sync_batchnorm]") {
  CudaBackend& be = cuda_backend();
  if (!have_nccl(be)) return;
  const Model model = make_model();
  std::unique_ptr<DeviceCollective> one = be.join_collective(be.make_collective_id(), 0, 1);
  for (const auto& [math, scaling] : {std::pair<MathMode, bool>{MathMode::strict_fp32, false},
                                      {MathMode::bf16, false},
                                      {MathMode::fp16, true}}) {
    if (math != MathMode::strict_fp32 && !gpu_has_math(math)) continue;
    INFO("math " << math_name(math));
    RunOptions ro;
    ro.math = math;
    ro.loss_scaling = scaling;
    const Trained plain = train(be, model, nullptr, nullptr, 0, 1, ro);
    const Trained synced = train(be, model, one.get(), nullptr, 0, 1, ro);
    CHECK(rel_error(synced.params, plain.params) < 1e-6);
    CHECK(rel_error(synced.buffers, plain.buffers) < 1e-6);
    CHECK(synced.graphs >= 1);  // the all-reduces of the sums were recorded with the step
    ro.bucket_bytes = 1;        // and between buckets launched during the backward pass
    const Trained bucketed = train(be, model, one.get(), nullptr, 0, 1, ro);
    CHECK(rel_error(bucketed.params, plain.params) < 1e-6);
    CHECK(bucketed.graphs >= 1);
  }
}

TEST_CASE("gpu two replicas with sync batchnorm end with gpu:0's weights and running statistics",
          "[gpu][nccl][2gpu][sync_batchnorm]") {
  if (!have_nccl(cuda_backend()) || !have_two_gpus()) return;
  const Model model = make_model();
  for (const auto& [math, scaling] : {std::pair<MathMode, bool>{MathMode::strict_fp32, false},
                                      {MathMode::bf16, false},
                                      {MathMode::fp16, true}}) {
    if (math != MathMode::strict_fp32 && !gpu_has_math(math)) continue;
    // A last batch of 5 rows (shards of 2 and 3), then of 1 row (replica 0's shard is empty), each
    // with one gradient all-reduce after the backward pass and with a bucket per layer.
    for (const int64_t tail : {int64_t(5), int64_t(1)})
      for (const size_t bucket_bytes : {size_t(0), size_t(1)}) {
        INFO("math " << math_name(math) << ", last batch of " << tail << " rows, "
                     << (bucket_bytes ? "a bucket per layer" : "one gradient all-reduce"));
        RunOptions ro;
        ro.math = math;
        ro.loss_scaling = scaling;
        ro.tail_rows = tail;
        const Trained one = train(cuda_backend(), model, nullptr, nullptr, 0, 1, ro);
        ro.bucket_bytes = bucket_bytes;
        const std::vector<Trained> got = train_two(model, ro);
        REQUIRE(got[0].params == got[1].params);    // every replica applies the same update
        REQUIRE(got[0].buffers == got[1].buffers);  // and keeps the same running statistics
        CHECK(got[1].graphs >= 1);
        const double ep = rel_error(got[0].params, one.params), eb = rel_error(got[0].buffers, one.buffers);
        // fp32: only the order of the sums differs. bf16 and fp16 round every activation, and the
        // replicas' convolutions of 8 rows (other algorithms, other sums) round some of them
        // differently; batchnorm over small batches amplifies that step by step (2x H200, 5 steps:
        // 2e-2 in bf16, 3e-3 in fp16, where gpu:0 itself is 3e-2 and 2e-2 from its fp32 run, and
        // the unsynchronized replicas 0.14 from gpu:0). So the bound there is twice the dtype's
        // own error: gpu:0 in the dtype against gpu:0 in fp32.
        double bound_p = 1e-5, bound_b = 1e-5;
        if (math != MathMode::strict_fp32) {
          RunOptions f32;
          f32.tail_rows = tail;
          const Trained ref = train(cuda_backend(), model, nullptr, nullptr, 0, 1, f32);
          bound_p = 2 * rel_error(one.params, ref.params);
          bound_b = 2 * rel_error(one.buffers, ref.buffers);
        }
        INFO("2 replicas vs gpu:0: parameters rel "
             << ep << " (bound " << bound_p << "), running statistics rel " << eb << " (bound " << bound_b
             << ")");
        CHECK(ep < bound_p);
        CHECK(eb < bound_b);
      }
  }
}

TEST_CASE("gpu two replicas without sync batchnorm end far from gpu:0 (the comparison can fail)",
          "[gpu][nccl][2gpu][sync_batchnorm]") {
  if (!have_nccl(cuda_backend()) || !have_two_gpus()) return;
  const Model model = make_model();
  RunOptions ro;
  ro.sync = false;
  const Trained one = train(cuda_backend(), model, nullptr, nullptr, 0, 1, ro);
  const std::vector<Trained> got = train_two(model, ro);
  const double ep = rel_error(got[0].params, one.params), eb = rel_error(got[0].buffers, one.buffers);
  INFO("unsynchronized: parameters rel " << ep << ", running statistics rel " << eb);
  CHECK(ep > 1e-3);
  CHECK(eb > 1e-2);
}

TEST_CASE("gpu fit over gpu:0,1 with device.sync_batchnorm tracks fit on gpu:0",
          "[gpu][nccl][2gpu][fit][sync_batchnorm]") {
  if (!have_nccl(cuda_backend()) || !have_two_gpus()) return;
  const char* yaml = R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 64}, {type: batchnorm}, {type: relu}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9}
data: {train: {format: disc, samples: 300}, num_classes: 2, batch_size: 25, validation_split: 0.2}
train: {epochs: 3, seed: 5}
device: {type: gpu, sync_batchnorm: true}
)";
  const Config cfg = parse_config(yaml, "fit.yaml", {});
  FitOptions fo;
  fo.device.device = "gpu:0";
  fo.device.deterministic = true;
  std::ostringstream out1, out2;
  const FitResult one = fit(cfg, fo, out1);
  const FitResult two = fit_replicas(cfg, fo, {0, 1}, out2);
  INFO("final losses: train " << one.final_train_loss << " (gpu:0) " << two.final_train_loss
                              << " (gpu:0,1), validation " << one.final_val_loss << " "
                              << two.final_val_loss);
  CHECK(two.epochs_run == 3);
  CHECK(std::abs(two.final_train_loss - one.final_train_loss) <= 1e-5 * one.final_train_loss);
  // Validation normalizes by the running statistics: the global batches' on every replica.
  CHECK(std::abs(two.final_val_loss - one.final_val_loss) <= 1e-5 * one.final_val_loss);
}
