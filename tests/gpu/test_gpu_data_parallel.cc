// Data parallelism over NCCL (lib/backend/device_collective.h, kernels/cuda/nccl_collective.h):
//   - one GPU (the degenerate case every GPU machine runs): an executor whose gradients go through
//     a one-replica NCCL collective (weighted all-reduce, flag OR) trains bit for bit like one
//     without, and its steps are still recorded as CUDA graphs; the flag OR and the broadcast of
//     one replica leave their data as it is; the same with the gradients in buckets of one layer,
//     each all-reduced on the collective's side stream while the backward pass goes on (fp32,
//     bf16, fp16 with loss scaling);
//   - two GPUs (skipped, visibly, with fewer): two replicas (threads, each with its own backend on
//     its own GPU) training on the halves of every batch end with the same weights, bit for bit,
//     and within rel 1e-5 of one GPU training on the whole batches (only the order of float sums
//     differs), also with buckets of one layer and a last batch of one row (one replica's shard
//     is empty: it runs no backward pass and still launches every bucket); the OR of two flag
//     words is their OR; fit over gpu:0,1 (fit_replicas) tracks fit on gpu:0 within rel 1e-4 of
//     the final losses. Compressed sums (device.gradient_compression): one replica gives its own
//     weighted values rounded once to bf16 / fp16, and training through it stays within 1e-3 of
//     fp32; two replicas with bf16 agree bit for bit, within 1e-3 of one GPU.
// Cases that need NCCL print SKIPPED in a build without it.
#include <chrono>
#include <cstdlib>
#include <functional>
#include <future>
#include <sstream>
#include <thread>

#include "lib/config/config.h"
#include "lib/core/bf16.h"
#include "lib/core/fp16.h"
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

// No dropout or batchnorm: replicas would draw other masks, or normalize by their shard.
const char* kNet = R"(model:
  input_shape: [1, 12, 12]
  layers:
    - {type: conv2d, filters: 4, kernel_size: 3, padding: same, activation: relu}
    - {type: maxpool2d}
    - {type: flatten}
    - {type: dense, units: 16, activation: tanh}
    - {type: dense, units: 8}
data: {train: {format: random}, num_classes: 8}
)";

constexpr int64_t kSteps = 5;

// How train() runs: four full batches of 16 rows and a tail of tail_rows.
struct RunOptions {
  size_t bucket_bytes = 0;  // ExecutorOptions::bucket_bytes (1: a bucket per layer)
  int64_t tail_rows = 5;
  MathMode math = MathMode::strict_fp32;
  bool loss_scaling = false;
  DType compression = DType::f32;  // ExecutorOptions::gradient_compression (with a collective)
};

struct Trained {
  std::vector<float> tensors;  // the parameter tensors, without the arena's alignment padding
  size_t graphs = 0;           // CUDA graphs recorded
  size_t buckets = 0;          // the executor's gradient buckets
};

std::vector<int32_t> labels_of(int64_t rows, uint64_t seed) {
  SplitMix64 rng = SplitMix64::counter(seed);
  std::vector<int32_t> y(static_cast<size_t>(rows));
  for (auto& v : y) v = int32_t(rng.next_u64() % 8);
  return y;
}

// Whether this build joins NCCL collectives; otherwise prints the SKIPPED line.
bool have_nccl(Backend& be) {
  if (be.collectives_unavailable().empty()) return true;
  std::cout << "SKIPPED: " << be.collectives_unavailable() << "\n";
  return false;
}

// Replica `rank` of `ranks` trains kSteps steps on its shard of every global batch (one replica:
// the whole batches). `collective` null: no collective at all.
Trained train(Backend& be, const Model& model, DeviceCollective* collective, Communicator* comm, int rank,
              int ranks, const RunOptions& ro = {}) {
  const Optimizer opt(make_optimizer("{type: sgd, lr: 0.05, momentum: 0.9}"));
  ExecutorOptions o;
  o.batch_sizes = shard_batch_sizes({16, ro.tail_rows}, ranks);
  o.num_classes = 8;
  o.loss = loss_config("cross_entropy");
  o.seed = 42;
  o.deterministic = true;
  o.comm = comm;
  o.collective = collective;
  o.bucket_bytes = ro.bucket_bytes;
  o.gradient_compression = collective ? ro.compression : DType::f32;
  o.math = ro.math;
  o.loss_scaling = ro.loss_scaling;
  Executor ex(model, be, opt, o);
  Trained out;
  out.buckets = ex.gradient_buckets().size();
  std::vector<float> params(size_t(model.param_arena_floats()));
  std::vector<float> buffers(size_t(std::max<int64_t>(model.buffer_arena_floats(), 1)));
  model.initialize(params.data(), buffers.data(), 7);
  ex.upload_params(params.data(), buffers.data());
  const int64_t in = model.input_shape().numel();
  auto* cuda = dynamic_cast<CudaBackend*>(&be);
  const size_t graphs_before = cuda ? cuda->graph_count() : 0;
  for (int64_t t = 1; t <= kSteps; ++t) {
    const int64_t rows = t == kSteps ? ro.tail_rows : 16;
    const std::vector<float> x = random_vector(size_t(rows * in), 1000 + uint64_t(t));
    const std::vector<int32_t> y = labels_of(rows, uint64_t(t));
    const Shard sh = shard_of(rows, rank, ranks);
    ex.train_step(sh.rows, x.data() + sh.begin * in, y.data() + sh.begin, t, 0.05f, rows);
  }
  if (cuda) out.graphs = cuda->graph_count() - graphs_before;
  ex.download_params(params.data(), nullptr);
  for (const TensorSlot& s : model.params())
    out.tensors.insert(out.tensors.end(), params.begin() + s.offset,
                       params.begin() + s.offset + s.shape.numel());
  return out;
}

}  // namespace

TEST_CASE("gpu one-replica NCCL collective: the step trains bit for bit as without, inside a CUDA graph",
          "[gpu][nccl]") {
  CudaBackend& be = cuda_backend();
  if (!have_nccl(be)) return;
  Config c = parse_config(kNet, "dp.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  const std::vector<float> plain = train(be, model, nullptr, nullptr, 0, 1).tensors;
  std::unique_ptr<DeviceCollective> one = be.join_collective(be.make_collective_id(), 0, 1);
  INFO(one->description());
  const Trained reduced = train(be, model, one.get(), nullptr, 0, 1);
  REQUIRE(reduced.buckets == 1);  // a small model under no cap: one all-reduce after backward
  REQUIRE(reduced.tensors == plain);
  // Full batches: one eager step, then recorded; the tail batch runs eagerly once. A failed
  // capture would have logged a warning (which fails the test) and recorded nothing.
  CHECK(reduced.graphs >= 1);

  Buffer word(be, sizeof(uint32_t));
  word.upload(std::vector<uint32_t>{0xA5u});
  one->all_reduce_or(word.as<uint32_t>());
  CHECK(word.download<uint32_t>(1)[0] == 0xA5u);
  // Overlapped: bits set after the spread (here by a copy in stream order) stay after the join.
  one->all_reduce_or_async(word.as<uint32_t>());
  word.upload(std::vector<uint32_t>{0x100u});
  one->wait_all();
  CHECK(word.download<uint32_t>(1)[0] == 0x1A5u);
  Buffer x(be, 3 * sizeof(float));
  x.upload(std::vector<float>{1.f, -2.f, 3.5f});
  one->broadcast(x.as<float>(), 3, 0);
  CHECK(x.download(3) == std::vector<float>{1.f, -2.f, 3.5f});
}

TEST_CASE("gpu one-replica NCCL collective in buckets launched during backward: bit for bit as without",
          "[gpu][nccl][buckets]") {
  CudaBackend& be = cuda_backend();
  if (!have_nccl(be)) return;
  Config c = parse_config(kNet, "dp.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  std::unique_ptr<DeviceCollective> one = be.join_collective(be.make_collective_id(), 0, 1);
  // fp32; bf16 and fp16 activations (the parameter gradients stay f32, written by the kernels
  // themselves); fp16 with loss scaling (the unscale and the finite check after the join).
  for (const auto& [math, scaling] : {std::pair<MathMode, bool>{MathMode::strict_fp32, false},
                                      {MathMode::bf16, false},
                                      {MathMode::fp16, true}}) {
    if (math != MathMode::strict_fp32 && !gpu_has_math(math)) continue;
    INFO("math " << math_name(math) << (scaling ? " with loss scaling" : ""));
    RunOptions ro;
    ro.math = math;
    ro.loss_scaling = scaling;
    const std::vector<float> plain = train(be, model, nullptr, nullptr, 0, 1, ro).tensors;
    // The reference repeats bit for bit (deterministic algorithms), so a difference below is the
    // buckets' doing.
    REQUIRE(train(be, model, nullptr, nullptr, 0, 1, ro).tensors == plain);
    ro.bucket_bytes = 1;  // every layer with parameters its own bucket: conv2d, dense, dense
    const Trained bucketed = train(be, model, one.get(), nullptr, 0, 1, ro);
    REQUIRE(bucketed.buckets == 3);
    REQUIRE(bucketed.tensors == plain);
    // Forked onto the side stream and joined back inside the recorded step: still captured.
    CHECK(bucketed.graphs >= 1);
    // A cap one byte under the arena: the two dense layers share a bucket, the conv2d has its own.
    ro.bucket_bytes = size_t(model.param_arena_floats()) * sizeof(float) - 1;
    const Trained two = train(be, model, one.get(), nullptr, 0, 1, ro);
    CHECK(two.buckets == 2);
    REQUIRE(two.tensors == plain);
  }
}

TEST_CASE(
    "gpu compressed sums (device.gradient_compression): each replica's weighted values rounded to "
    "bf16 or fp16, summed, widened back",
    "[gpu][nccl][compression]") {
  CudaBackend& be = cuda_backend();
  if (!have_nccl(be)) return;
  const std::vector<float> v = random_vector(1000, 91, -3.f, 3.f);
  Buffer weight(be, sizeof(float));
  weight.upload(std::vector<float>{0.3f});
  for (const DType t : {DType::bf16, DType::f16}) {
    INFO("compressed to " << dtype_name(t));
    std::unique_ptr<DeviceCollective> one = be.join_collective(be.make_collective_id(), 0, 1);
    one->set_weight(weight.as<float>());
    REQUIRE(one->sums_dtype() == DType::f32);
    one->compress_sums(t, 1000);
    REQUIRE(one->sums_dtype() == t);
    // One replica: the sum is its own weighted values, rounded once to t.
    std::vector<float> want(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      want[i] = t == DType::bf16 ? round_to_bf16(v[i] * 0.3f) : float_from_f16(f16_from_float(v[i] * 0.3f));
    Buffer x(be, v.size() * sizeof(float));
    x.upload(v);
    one->all_reduce_sum(x.as<float>(), 1000, /*weighted=*/true);
    CHECK(x.download(1000) == want);
    x.upload(v);  // the same on the side stream, joined back
    one->all_reduce_sum_async(x.as<float>(), 600, true);
    one->wait_all();
    std::vector<float> part = want;
    std::copy(v.begin() + 600, v.end(), part.begin() + 600);  // past n: untouched
    CHECK(x.download(1000) == part);
    REQUIRE_THROWS_AS(one->all_reduce_sum(x.as<float>(), 1001, true), InternalError);  // over the staging
  }
  // Training through a one-replica collective with a bucket per layer: the gradients are rounded,
  // so the weights move a little off the uncompressed run's, and not at all past bf16's precision.
  Config c = parse_config(kNet, "dp.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  RunOptions ro;
  ro.bucket_bytes = 1;
  const std::vector<float> plain = train(be, model, nullptr, nullptr, 0, 1, ro).tensors;
  std::unique_ptr<DeviceCollective> one = be.join_collective(be.make_collective_id(), 0, 1);
  ro.compression = DType::bf16;
  const Trained bf = train(be, model, one.get(), nullptr, 0, 1, ro);
  CHECK(bf.graphs >= 1);  // the narrowing and widening are recorded with the step
  const double e = rel_error(bf.tensors, plain);
  INFO("bf16-compressed gradients vs fp32: parameter rel error " << e);
  CHECK(e > 0);
  CHECK(e < 1e-3);
}

TEST_CASE("gpu two replicas over NCCL train like one GPU on the whole batches", "[gpu][nccl][2gpu]") {
  if (!have_nccl(cuda_backend()) || !have_two_gpus()) return;
  Config c = parse_config(kNet, "dp.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  const std::vector<float> one = train(cuda_backend(), model, nullptr, nullptr, 0, 1).tensors;
  std::vector<std::vector<float>> got(2);
  std::vector<uint32_t> ored(2, 0), ored_async(2, 0);
  const std::vector<std::string> errors =
      on_two_replicas([&](CudaBackend& be, DeviceCollective& dc, Communicator& comm, int r) {
        got[size_t(r)] = train(be, model, &dc, &comm, r, 2).tensors;
        Buffer word(be, sizeof(uint32_t));
        word.upload(std::vector<uint32_t>{r == 0 ? 1u : 4u});
        dc.all_reduce_or(word.as<uint32_t>());
        ored[size_t(r)] = word.download<uint32_t>(1)[0];
        // Overlapped: each replica's later bit stays its own, the earlier ones are everyone's.
        word.upload(std::vector<uint32_t>{r == 0 ? 1u : 4u});
        dc.all_reduce_or_async(word.as<uint32_t>());
        word.upload(std::vector<uint32_t>{r == 0 ? 16u : 32u});
        dc.wait_all();
        ored_async[size_t(r)] = word.download<uint32_t>(1)[0];
      });
  INFO("replica 0: " << errors[0] << "; replica 1: " << errors[1]);
  REQUIRE(errors[0].empty());
  REQUIRE(errors[1].empty());
  REQUIRE(got[0] == got[1]);  // every replica applies the same update
  CHECK(ored[0] == 5u);
  CHECK(ored[1] == 5u);
  CHECK(ored_async[0] == 21u);
  CHECK(ored_async[1] == 37u);
  const double e = rel_error(got[0], one);
  INFO("2 replicas vs 1 GPU: parameter rel error " << e);
  CHECK(e < 1e-5);
}

TEST_CASE("gpu two replicas with a bucket per layer, reduced during backward, train like one GPU",
          "[gpu][nccl][2gpu][buckets]") {
  if (!have_nccl(cuda_backend()) || !have_two_gpus()) return;
  Config c = parse_config(kNet, "dp.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  // A last batch of 5 rows (shards of 2 and 3), then of 1 row: replica 0's shard is empty, so it
  // runs no backward pass and launches all three buckets after it; replica 1 launches them during
  // its backward pass. The calls match, in the same order, or NCCL would hang.
  for (const int64_t tail : {int64_t(5), int64_t(1)}) {
    INFO("last batch of " << tail << " rows");
    RunOptions ro;
    ro.tail_rows = tail;
    const std::vector<float> one = train(cuda_backend(), model, nullptr, nullptr, 0, 1, ro).tensors;
    ro.bucket_bytes = 1;
    std::vector<Trained> got(2);
    const std::vector<std::string> errors =
        on_two_replicas([&](CudaBackend& be, DeviceCollective& dc, Communicator& comm, int r) {
          got[size_t(r)] = train(be, model, &dc, &comm, r, 2, ro);
        });
    INFO("replica 0: " << errors[0] << "; replica 1: " << errors[1]);
    REQUIRE(errors[0].empty());
    REQUIRE(errors[1].empty());
    REQUIRE(got[0].buckets == 3);
    REQUIRE(got[0].tensors == got[1].tensors);  // every replica applies the same update
    CHECK(got[1].graphs >= 1);                  // the bucketed step was recorded
    const double e = rel_error(got[0].tensors, one);
    INFO("2 replicas in buckets vs 1 GPU: parameter rel error " << e);
    CHECK(e < 1e-5);
    // The same with the gradients sent as bf16: the replicas still agree bit for bit, within
    // bf16's rounding of one GPU.
    ro.compression = DType::bf16;
    std::vector<Trained> bf(2);
    const std::vector<std::string> errs =
        on_two_replicas([&](CudaBackend& be, DeviceCollective& dc, Communicator& comm, int r) {
          bf[size_t(r)] = train(be, model, &dc, &comm, r, 2, ro);
        });
    INFO("bf16: replica 0: " << errs[0] << "; replica 1: " << errs[1]);
    REQUIRE(errs[0].empty());
    REQUIRE(errs[1].empty());
    REQUIRE(bf[0].tensors == bf[1].tensors);
    const double eb = rel_error(bf[0].tensors, one);
    INFO("2 replicas, gradients sent as bf16, vs 1 GPU: parameter rel error " << eb);
    CHECK(eb > 0);
    CHECK(eb < 1e-3);
  }
}

TEST_CASE("gpu fit over gpu:0,1 (one replica per GPU) tracks fit on gpu:0", "[gpu][nccl][2gpu][fit]") {
  if (!have_nccl(cuda_backend()) || !have_two_gpus()) return;
  const char* yaml = R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 64}, {type: relu}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9}
data: {train: {format: disc, samples: 300}, num_classes: 2, batch_size: 32, validation_split: 0.2}
train: {epochs: 3, seed: 5}
)";
  Config cfg = parse_config(yaml, "fit.yaml", {});
  FitOptions fo;
  fo.device.device = "gpu:0";
  fo.device.deterministic = true;
  std::ostringstream out1, out2;
  const FitResult one = fit(cfg, fo, out1);
  const FitResult two = fit_replicas(cfg, fo, {0, 1}, out2);
  INFO("final train loss 1 GPU " << one.final_train_loss << ", 2 GPUs " << two.final_train_loss);
  CHECK(two.epochs_run == 3);
  CHECK(std::abs(two.final_train_loss - one.final_train_loss) <= 1e-4 * one.final_train_loss);
  CHECK(std::abs(two.final_val_loss - one.final_val_loss) <= 1e-4 * one.final_val_loss);
  CHECK(two.final_val_accuracy == one.final_val_accuracy);
}

// A replica that fails after its steps were recorded as CUDA graphs (which captured the NCCL
// communicator) stops the other, which is then waiting inside an all-reduce on its GPU: the other's
// communicator is aborted, it unwinds with an error naming the abort, and nothing hangs (NCCL frees
// a communicator only once the graphs that captured it are destroyed; a watchdog fails the test
// process if the replicas have not ended in 120 s).
TEST_CASE("gpu a replica failing mid-training stops the other inside its graphs, without a hang",
          "[gpu][nccl][2gpu]") {
  if (!have_nccl(cuda_backend()) || !have_two_gpus()) return;
  Config c = parse_config(kNet, "dp.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  auto run = std::async(std::launch::async, [&] {
    return on_two_replicas([&](CudaBackend& be, DeviceCollective& dc, Communicator& comm, int r) {
      if (r == 0) {
        // Steps 3 to 5 are queued; step 3's all-reduce waits for replica 1 until the abort ends it,
        // and the read of the weights then throws (Executor::download_params).
        train(be, model, &dc, &comm, r, 2);
        return;
      }
      const Optimizer opt(make_optimizer("{type: sgd, lr: 0.05}"));
      ExecutorOptions o;
      o.batch_sizes = shard_batch_sizes({16}, 2);
      o.num_classes = 8;
      o.loss = loss_config("cross_entropy");
      o.comm = &comm;
      o.collective = &dc;
      Executor ex(model, be, opt, o);
      const int64_t in = model.input_shape().numel();
      for (int64_t t = 1; t <= 2; ++t) {  // eager, then recorded and replayed
        const std::vector<float> x = random_vector(size_t(16 * in), 1000 + uint64_t(t));
        const std::vector<int32_t> y = labels_of(16, uint64_t(t));
        const Shard sh = shard_of(16, r, 2);
        ex.train_step(sh.rows, x.data() + sh.begin * in, y.data() + sh.begin, t, 0.05f, 16);
      }
      be.synchronize();
      throw RuntimeError("replica 1 fails on purpose after 2 steps");
    });
  });
  if (run.wait_for(std::chrono::seconds(120)) != std::future_status::ready) {
    std::cout << "FAILED: the replicas did not end within 120 s after replica 1 failed (a hang)" << std::endl;
    std::_Exit(1);
  }
  const std::vector<std::string> errors = run.get();
  INFO("replica 0: " << errors[0] << "; replica 1: " << errors[1]);
  CHECK(errors[1].find("on purpose") != std::string::npos);
  CHECK(errors[0].find("aborted") != std::string::npos);  // not a silent success on partial sums
}
