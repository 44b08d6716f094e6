// Data parallelism without mpirun: the ranks are threads of this process (lib/dist/thread_world.h),
// each with its own CPU backend and executor. Ranks training on their shards of every batch, with
// gradients all-reduced, end with the weights of one process training on the whole batches: even
// and uneven shards, and more ranks than rows (empty shards). optimizer.scale_lr: linear trains
// two ranks at twice the rate. The MPI path itself runs in tests/scripts/mpi_test.sh.
#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>
#include <thread>

#include "kernels/cpu/cpu_backend.h"
#include "lib/config/config.h"
#include "lib/core/rng.h"
#include "lib/core/shard.h"
#include "lib/dist/thread_world.h"
#include "lib/model/executor.h"
#include "lib/train/data_parallel.h"
#include "lib/train/fit.h"
#include "tests/test_util.h"
#include "tests/thread_ranks.h"

using namespace trainer;

namespace {

const char* kYaml = R"(model:
  input_shape: [6]
  layers: [{type: dense, units: 16}, {type: relu}, {type: dense, units: 3}]
data: {train: {format: random}, num_classes: 3}
)";

struct Batches {
  int64_t rows = 0, steps = 0;
  std::vector<float> x;  // (steps * rows, 6)
  std::vector<int32_t> y;
};

Batches make_batches(int64_t rows, int64_t steps) {
  Batches b;
  b.rows = rows;
  b.steps = steps;
  SplitMix64 rng(42);
  for (int64_t i = 0; i < rows * steps * 6; ++i) b.x.push_back(float(rng.next_below(2001)) / 1000.f - 1.f);
  for (int64_t i = 0; i < rows * steps; ++i) b.y.push_back(int32_t(rng.next_below(3)));
  return b;
}

struct Trained {
  std::vector<float> params;
  MetricSums sums;
};

// One rank's run: its shard of every batch, `comm` null for the single process.
Trained train(const Model& model, const Batches& b, Communicator* comm) {
  const int rank = comm ? comm->rank() : 0, ranks = comm ? comm->size() : 1;
  CpuBackend backend(0, 1);
  OptimizerConfig oc;  // adam: its state must stay identical on every rank too
  oc.lr = 0.01;
  Optimizer opt(oc);
  ExecutorOptions o = test::classifier_options(shard_batch_sizes({b.rows}, ranks), 3);
  o.comm = comm;
  Executor ex(model, backend, opt, o);
  std::vector<float> params(size_t(model.param_arena_floats())), buffers(size_t(model.buffer_arena_floats()));
  model.initialize(params.data(), buffers.data(), 5);
  ex.upload_params(params.data(), buffers.data());
  ex.reset_metrics();
  for (int64_t s = 0; s < b.steps; ++s) {
    const Shard sh = shard_of(b.rows, rank, ranks);
    const int64_t first = s * b.rows + sh.begin;
    ex.train_step(sh.rows, b.x.data() + first * 6, b.y.data() + first, s + 1, float(oc.lr), b.rows);
  }
  Trained t;
  SingleProcess one;
  t.sums = all_reduce_sums(comm ? *comm : one, ex.read_metrics());
  ex.download_params(params.data(), buffers.data());
  t.params = params;
  return t;
}

}  // namespace

TEST_CASE("ranks training on shards of each batch end with the single process's weights and metrics",
          "[data_parallel]") {
  // No batchnorm: it normalizes each rank's shard by that shard's statistics (PyTorch DDP's
  // default), where one process uses the whole batch's.
  Config c = parse_config(kYaml, "dp.yaml", {});
  Model mlp(c.input_shape, c.layers, c.init, c.file);
  for (auto [rows, ranks] : {std::pair<int64_t, int>{8, 2}, {7, 2}, {7, 3}, {3, 4}}) {
    INFO(rows << " rows over " << ranks << " ranks");
    const Batches b = make_batches(rows, 5);
    const Trained one = train(mlp, b, nullptr);
    ThreadHub hub(ranks, "rank", "test threads");
    std::vector<Trained> got(static_cast<size_t>(ranks));
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r)
      threads.emplace_back([&, r] {
        ThreadRank comm(hub, r);
        got[size_t(r)] = train(mlp, b, &comm);
      });
    for (auto& t : threads) t.join();
    for (int r = 0; r < ranks; ++r) {
      INFO("rank " << r);
      REQUIRE(got[size_t(r)].params == got[0].params);  // every replica applies the same update
      REQUIRE(got[size_t(r)].sums.samples == rows * 5);
      REQUIRE(got[size_t(r)].sums.loss_sum == Approx(one.sums.loss_sum).epsilon(1e-5));
      REQUIRE(got[size_t(r)].sums.confusion == got[0].sums.confusion);
    }
    REQUIRE(got[0].sums.confusion == one.sums.confusion);
    double worst = 0;
    for (size_t i = 0; i < one.params.size(); ++i)
      worst = std::max(worst, double(std::fabs(got[0].params[i] - one.params[i])));
    // Only the order of the float sums differs (rank shards, then ranks).
    REQUIRE(worst < 1e-5);
  }
}

TEST_CASE("a rank that fails stops the ranks waiting for it, naming it, and runs the failure hooks once",
          "[data_parallel]") {
  ThreadHub hub(3, "replica", "test threads");
  int hooks_run = 0;
  hub.add_failure_hook([&] { ++hooks_run; });
  std::vector<std::string> seen(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      ThreadRank comm(hub, r);
      try {
        if (r == 2) throw DataError("sample 7 is not finite");
        double x = 1;
        comm.all_reduce_sum(&x, 1);  // ranks 0 and 1 wait here for rank 2, which never comes
        seen[size_t(r)] = "returned";
      } catch (const WorldStopped& e) {
        seen[size_t(r)] = e.what();
      } catch (const Error& e) {
        hub.fail(r, e.what());
        seen[size_t(r)] = "failed";
      }
    });
  for (auto& t : threads) t.join();
  REQUIRE(hub.failed_rank() == 2);
  REQUIRE(hooks_run == 1);
  REQUIRE(seen[2] == "failed");
  for (int r = 0; r < 2; ++r)
    REQUIRE(seen[size_t(r)] == "stopped: replica 2 of 3 failed: sample 7 is not finite");
  // Later collectives stop at once; a hook added after the failure runs at once.
  ThreadRank late(hub, 0);
  uint64_t v = 0;
  REQUIRE_THROWS_AS(late.all_reduce_max(&v, 1), WorldStopped);
  hub.add_failure_hook([&] { ++hooks_run; });
  REQUIRE(hooks_run == 2);
  hub.fail(1, "a second failure");  // kept: the first
  REQUIRE(hub.failure() == "sample 7 is not finite");
}

TEST_CASE("scale_lr: linear trains two ranks at twice optimizer.lr; none keeps optimizer.lr",
          "[data_parallel][optimizer]") {
  const char* yaml = R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 8}, {type: relu}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: sgd, lr: 0.1}
data: {train: {format: disc, samples: 64}, num_classes: 2, batch_size: 16}
train: {epochs: 1, seed: 3}
)";
  FitOptions fo;
  fo.device.threads = 1;
  for (const std::string scale : {"linear", "none"}) {
    INFO("scale_lr: " << scale);
    const Config cfg = parse_config(yaml, "lr.yaml", {"optimizer.scale_lr=" + scale});
    const test::RankRuns runs = test::fit_on_two_thread_ranks(cfg, fo);
    const std::vector<std::string>& errors = runs.errors;
    const std::vector<double> lr{runs.results[0].final_lr, runs.results[1].final_lr};
    REQUIRE(errors[0].empty());
    REQUIRE(errors[1].empty());
    REQUIRE(lr[0] == Approx(scale == "linear" ? 0.2 : 0.1));
    REQUIRE(lr[1] == lr[0]);
    // One process: a factor of 1.
    std::ostringstream out;
    REQUIRE(fit(cfg, fo, out).final_lr == Approx(0.1));
  }
  // The log says what the factor did.
  const std::string path = test::write_file(test::temp_dir("scale_lr"), "lr.yaml", yaml);
  const auto run = test::run_trainer("fit " + path + " --threads 1 --set optimizer.scale_lr=linear");
  REQUIRE(run.exit_code == 0);
  REQUIRE_THAT(run.err, Catch::Contains("info: lr 0.1 x 1 replica = 0.1 (scale_lr: linear)"));
}
