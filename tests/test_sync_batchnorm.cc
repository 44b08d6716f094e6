// Synchronized batchnorm (device.sync_batchnorm; lib/core/batchnorm_sync_formula.h) on CPU ranks
// that are threads of this process (lib/dist/thread_world.h):
//   - the formulas against a plain-loop reference of the global batch, itself checked by finite
//     differences: replicas with uneven shards, each weighting its sums by its shard weight, hand
//     on the exact gradient of the global loss;
//   - ranks training a batchnorm CNN (conv -> batchnorm -> relu, the CPU's blocked nChw16c and
//     channels-last layouts, a batchnorm over dense features) on shards of every batch end with
//     the single process's weights AND running statistics, within rel 1e-5 (the order of float
//     sums and oneDNN's variance against ours are all that differ): even and uneven shards (5 rows
//     over 2 ranks), empty shards (1 row over 2 ranks, 2 rows over 3), one rank, plain layouts;
//     every rank ends with the same bits; without sync_batchnorm the same comparison fails clearly;
//   - fit over two ranks with sync_batchnorm tracks one process's training and validation losses
//     (validation reads the running statistics), and without it does not;
//   - ranks whose batchnorms run their relus (KernelContext::fused_relu) end with the bits of ranks
//     whose relus run apart;
//   - sync_batchnorm with pipeline micro-batches is refused.
// The mpirun path runs in tests/scripts/mpi_test.sh; the NCCL path in tests/gpu.
#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>
#include <thread>

#include "kernels/cpu/cpu_backend.h"
#include "lib/config/config.h"
#include "lib/core/batchnorm_sync_formula.h"
#include "lib/core/shard.h"
#include "lib/dist/thread_world.h"
#include "lib/model/executor.h"
#include "lib/train/fit.h"
#include "tests/test_util.h"
#include "tests/thread_ranks.h"

using namespace trainer;

namespace {

// ---- The formulas against a reference of the global batch ----

// Batchnorm of (N, C, S) values in double: forward y, and for the upstream gradient u = dL/dy the
// exact dx, dgamma, dbeta of L = sum u y.
struct Reference {
  int64_t N, C, S;
  std::vector<double> x, u, gamma, beta;
  double eps = 1e-5;
  size_t at(int64_t n, int64_t c, int64_t s) const { return size_t((n * C + c) * S + s); }
  void stats(int64_t c, double* mean, double* inv) const {
    double m = 0, v = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) m += x[at(n, c, s)];
    m /= double(N * S);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t s = 0; s < S; ++s) v += (x[at(n, c, s)] - m) * (x[at(n, c, s)] - m);
    *mean = m;
    *inv = 1 / std::sqrt(v / double(N * S) + eps);
  }
  double loss() const {  // sum u y
    double l = 0;
    for (int64_t c = 0; c < C; ++c) {
      double mean, inv;
      stats(c, &mean, &inv);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s)
          l += u[at(n, c, s)] * (gamma[size_t(c)] * (x[at(n, c, s)] - mean) * inv + beta[size_t(c)]);
    }
    return l;
  }
  // dx = gamma inv (u - mean(u) - xhat mean(u xhat)).
  void backward(std::vector<double>* dx, std::vector<double>* dgamma, std::vector<double>* dbeta) const {
    dx->assign(x.size(), 0);
    dgamma->assign(size_t(C), 0);
    dbeta->assign(size_t(C), 0);
    const double M = double(N * S);
    for (int64_t c = 0; c < C; ++c) {
      double mean, inv, su = 0, sux = 0;
      stats(c, &mean, &inv);
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) {
          su += u[at(n, c, s)];
          sux += u[at(n, c, s)] * (x[at(n, c, s)] - mean) * inv;
        }
      (*dgamma)[size_t(c)] = sux;
      (*dbeta)[size_t(c)] = su;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t s = 0; s < S; ++s) {
          const double xhat = (x[at(n, c, s)] - mean) * inv;
          (*dx)[at(n, c, s)] = gamma[size_t(c)] * inv * (u[at(n, c, s)] - su / M - xhat * sux / M);
        }
    }
  }
};

// ---- Ranks training a batchnorm network ----

// conv (10 filters: nChw16c with padding) -> batchnorm -> relu -> pool -> conv (channels-last on
// oneDNN's choice) -> batchnorm -> relu -> dense -> batchnorm over features -> relu -> dense.
const char* kCnn = R"([
    {type: conv2d, filters: 10, kernel_size: 3},
    {type: batchnorm},
    {type: relu},
    {type: maxpool2d, pool_size: 2},
    {type: conv2d, filters: 20, kernel_size: 3},
    {type: batchnorm, momentum: 0.3},
    {type: relu},
    {type: flatten},
    {type: dense, units: 16},
    {type: batchnorm},
    {type: relu},
    {type: dense, units: 4}])";
constexpr int64_t kClasses = 4;

struct Batches {
  std::vector<int64_t> rows;  // per step: the global batch's rows
  std::vector<float> x;       // every step's rows, one after another
  std::vector<int32_t> y;
};

Batches make_batches(const Model& model, std::vector<int64_t> rows) {
  Batches b;
  b.rows = std::move(rows);
  int64_t total = 0;
  for (int64_t r : b.rows) total += r;
  b.x = test::random_vector(size_t(total * model.input_shape().numel()), 11);
  SplitMix64 rng(3);
  for (int64_t i = 0; i < total; ++i) b.y.push_back(int32_t(rng.next_below(kClasses)));
  return b;
}

struct Trained {
  std::vector<float> params, buffers;
};

// One rank's run on its shard of every batch (comm null: the single process on whole batches).
Trained train(const Model& model, const Batches& b, Communicator* comm, bool sync, bool plain) {
  const int rank = comm ? comm->rank() : 0, ranks = comm ? comm->size() : 1;
  CpuBackend backend(0, 1);
  OptimizerConfig oc;
  oc.type = "sgd";
  oc.lr = 0.05;
  oc.hyper.set("momentum", 0.9);
  Optimizer opt(oc);
  ExecutorOptions o = test::classifier_options(shard_batch_sizes(b.rows, ranks), kClasses);
  o.comm = comm;
  o.sync_batchnorm = sync;
  o.plain_layouts = plain;
  Executor ex(model, backend, opt, o);
  Trained t;
  t.params.resize(size_t(model.param_arena_floats()));
  t.buffers.resize(size_t(model.buffer_arena_floats()));
  model.initialize(t.params.data(), t.buffers.data(), 5);
  ex.upload_params(t.params.data(), t.buffers.data());
  const int64_t in = model.input_shape().numel();
  int64_t first = 0;
  for (size_t s = 0; s < b.rows.size(); ++s) {
    const Shard sh = shard_of(b.rows[s], rank, ranks);
    const int64_t row = first + sh.begin;
    ex.train_step(sh.rows, b.x.data() + row * in, b.y.data() + row, int64_t(s) + 1, float(oc.lr), b.rows[s]);
    first += b.rows[s];
  }
  ex.download_params(t.params.data(), t.buffers.data());
  return t;
}

// Every rank's result; a failing rank stops the others (no test waits forever on a bug).
std::vector<Trained> train_ranks(const Model& model, const Batches& b, int ranks, bool sync, bool plain) {
  ThreadHub hub(ranks, "rank", "test threads");
  std::vector<Trained> got(static_cast<size_t>(ranks));
  std::vector<std::string> errors(static_cast<size_t>(ranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      try {
        ThreadRank comm(hub, r);
        got[size_t(r)] = train(model, b, &comm, sync, plain);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
        hub.fail(r, e.what());
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < ranks; ++r) {
    INFO("rank " << r);
    REQUIRE(errors[size_t(r)].empty());
  }
  return got;
}

// max |a - ref| / max |ref|.
double rel_diff(const std::vector<float>& a, const std::vector<float>& ref) {
  REQUIRE(a.size() == ref.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, double(std::fabs(a[i] - ref[i])));
    scale = std::max(scale, double(std::fabs(ref[i])));
  }
  REQUIRE(scale > 0);
  return diff / scale;
}

}  // namespace

TEST_CASE("sync batchnorm formulas: replicas with uneven shards hand on the global batch's exact gradient",
          "[sync_batchnorm]") {
  Reference ref{5, 3, 4, {}, {}, {}, {}};  // 5 rows: shards of 3 and 2
  const std::vector<float> x = test::random_vector(60, 1, -2.f, 3.f), u = test::random_vector(60, 2);
  ref.x.assign(x.begin(), x.end());
  ref.u.assign(u.begin(), u.end());
  ref.gamma = {0.5, 1.5, -0.7};
  ref.beta = {0.1, -0.2, 0.3};
  std::vector<double> dx, dgamma, dbeta;
  ref.backward(&dx, &dgamma, &dbeta);
  // The reference's dx is the derivative of sum u y: central differences.
  for (size_t i : {size_t(0), size_t(17), size_t(42), size_t(59)}) {
    Reference plus = ref, minus = ref;
    plus.x[i] += 1e-5;
    minus.x[i] -= 1e-5;
    REQUIRE((plus.loss() - minus.loss()) / 2e-5 == Approx(dx[i]).epsilon(1e-6).margin(1e-8));
  }
  // Replica r holds rows [begin, begin + n_r); its backward pass receives g = u / w_r (its loss is
  // the mean over its own rows), w_r = n_r / N.
  const int64_t C = ref.C, S = ref.S;
  const float eps = float(ref.eps);
  const std::vector<Shard> shards{{0, 3}, {3, 2}};
  std::vector<double> sums(size_t(2 * C + 1), 0);
  for (const Shard& sh : shards) {
    for (int64_t c = 0; c < C; ++c)
      for (int64_t n = sh.begin; n < sh.begin + sh.rows; ++n)
        for (int64_t s = 0; s < S; ++s) {
          sums[size_t(2 * c)] += float(ref.x[ref.at(n, c, s)]);
          sums[size_t(2 * c + 1)] += double(float(ref.x[ref.at(n, c, s)])) * float(ref.x[ref.at(n, c, s)]);
        }
    sums[size_t(2 * C)] += double(sh.rows * S);
  }
  std::vector<BatchNormStats> st;
  for (int64_t c = 0; c < C; ++c) {
    st.push_back(batchnorm_stats(sums[size_t(2 * c)], sums[size_t(2 * c + 1)], sums[size_t(2 * C)], eps));
    double mean, inv;
    ref.stats(c, &mean, &inv);
    REQUIRE(st.back().mean == Approx(mean).epsilon(1e-6));
    REQUIRE(st.back().inv == Approx(inv).epsilon(1e-6));
  }
  // Each replica's weighted sums of g and g (x - mean), all-reduced; its own dgamma and dbeta.
  std::vector<double> weighted(size_t(2 * C), 0), dgamma_sum(size_t(C), 0), dbeta_sum(size_t(C), 0);
  for (const Shard& sh : shards) {
    const double w = double(sh.rows) / double(ref.N);
    for (int64_t c = 0; c < C; ++c) {
      double sg = 0, sgx = 0;
      for (int64_t n = sh.begin; n < sh.begin + sh.rows; ++n)
        for (int64_t s = 0; s < S; ++s) {
          const double g = ref.u[ref.at(n, c, s)] / w;
          sg += g;
          sgx += g * (ref.x[ref.at(n, c, s)] - st[size_t(c)].mean);
        }
      weighted[size_t(2 * c)] += w * sg;
      weighted[size_t(2 * c + 1)] += w * sgx;
      dgamma_sum[size_t(c)] += w * sgx * st[size_t(c)].inv;  // the weighted gradient all-reduce
      dbeta_sum[size_t(c)] += w * sg;
    }
  }
  for (int64_t c = 0; c < C; ++c) {
    REQUIRE(dgamma_sum[size_t(c)] == Approx(dgamma[size_t(c)]).epsilon(1e-5));
    REQUIRE(dbeta_sum[size_t(c)] == Approx(dbeta[size_t(c)]).epsilon(1e-5));
  }
  // dx on each replica, times its weight (the factor its gradients get), is the global loss's dx.
  for (const Shard& sh : shards) {
    INFO("the shard of " << sh.rows << " rows");
    const double w = double(sh.rows) / double(ref.N);
    for (int64_t c = 0; c < C; ++c) {
      const BatchNormDx d =
          batchnorm_sync_dx(weighted[size_t(2 * c)], weighted[size_t(2 * c + 1)], float(ref.gamma[size_t(c)]),
                            st[size_t(c)].inv, double(sh.rows * S));
      for (int64_t n = sh.begin; n < sh.begin + sh.rows; ++n)
        for (int64_t s = 0; s < S; ++s) {
          const size_t i = ref.at(n, c, s);
          const double g = ref.u[i] / w;
          const double mine = d.scale * (g - d.shift - (ref.x[i] - st[size_t(c)].mean) * d.slope);
          REQUIRE(w * mine == Approx(dx[i]).epsilon(1e-5).margin(1e-6));
        }
    }
  }
  // The running statistics: PyTorch's rule with the unbiased variance of all M values.
  float rm = 0.5f, rv = 2.f;
  batchnorm_running_update(rm, rv, st[0], 20, 0.1f);
  REQUIRE(rm == Approx(0.9 * 0.5 + 0.1 * st[0].mean));
  REQUIRE(rv == Approx(0.9 * 2 + 0.1 * st[0].var * 20.0 / 19.0));
}

TEST_CASE(
    "sync_batchnorm: ranks on shards of each batch end with the single process's weights and running "
    "statistics",
    "[sync_batchnorm][data_parallel]") {
  const Model model(Shape{1, 14, 14}, YAML::Load(kCnn), InitScheme::torch, "test");
  REQUIRE(model.buffer_arena_floats() > 0);
  const bool plain = GENERATE(false, true);
  struct Case {
    std::vector<int64_t> rows;
    int ranks;
    const char* what;
  };
  for (const Case& k :
       {Case{{8, 8, 8, 8}, 2, "even shards"}, Case{{5, 5, 5, 5}, 2, "uneven shards of 3 and 2 rows"},
        Case{{7, 7, 6}, 3, "3 ranks, shards of 2 and 3 rows"},
        Case{{4, 1, 4, 1}, 2, "a batch of 1 row over 2 ranks: rank 0's shard is empty"},
        Case{{2, 2, 2}, 3, "2 rows over 3 ranks: rank 0's shard is always empty"},
        Case{{6, 6, 6}, 1, "one rank"}}) {
    INFO(k.what << (plain ? ", plain layouts" : ", the backend's layouts"));
    const Batches b = make_batches(model, k.rows);
    const Trained one = train(model, b, nullptr, false, plain);
    const std::vector<Trained> got = train_ranks(model, b, k.ranks, true, plain);
    for (int r = 1; r < k.ranks; ++r) {
      INFO("rank " << r);
      REQUIRE(got[size_t(r)].params == got[0].params);    // every rank applies the same update
      REQUIRE(got[size_t(r)].buffers == got[0].buffers);  // and keeps the same running statistics
    }
    // The order of float sums (shards, then ranks) and oneDNN's variance against E[x^2] - mean^2
    // in double are all that differ from one process.
    CHECK(rel_diff(got[0].params, one.params) < 1e-5);
    CHECK(rel_diff(got[0].buffers, one.buffers) < 1e-5);
  }
}

TEST_CASE("sync_batchnorm: ranks whose relus run inside the batchnorm end with the bits of separate relus",
          "[sync_batchnorm][data_parallel][fusion]") {
  // Every batchnorm of kCnn takes its relu (KernelContext::fused_relu); an identity view between
  // each pair keeps them apart. The synchronized loops read the masked gradient either way.
  std::string unfused = kCnn;
  const std::string pair = "{type: relu}";
  for (size_t at = unfused.find(pair); at != std::string::npos; at = unfused.find(pair, at + 40))
    unfused.insert(at, "{type: identity},\n    ");
  const Model fused_model(Shape{1, 14, 14}, YAML::Load(kCnn), InitScheme::torch, "test");
  const Model unfused_model(Shape{1, 14, 14}, YAML::Load(unfused), InitScheme::torch, "test");
  REQUIRE(unfused_model.layers().size() == fused_model.layers().size() + 3);
  const bool plain = GENERATE(false, true);
  INFO((plain ? "plain layouts" : "the backend's layouts"));
  const Batches b = make_batches(fused_model, {5, 5, 5});
  const std::vector<Trained> fused = train_ranks(fused_model, b, 2, true, plain);
  const std::vector<Trained> apart = train_ranks(unfused_model, b, 2, true, plain);
  for (int r = 0; r < 2; ++r) {
    INFO("rank " << r);
    CHECK(fused[size_t(r)].params == apart[size_t(r)].params);
    CHECK(fused[size_t(r)].buffers == apart[size_t(r)].buffers);
  }
}

TEST_CASE("without sync_batchnorm, ranks normalizing their own shards end far from the single process",
          "[sync_batchnorm][data_parallel]") {
  // The comparison above can fail: each rank's own statistics (PyTorch DDP's default) give other
  // gradients, and rank 0's running statistics are its shard's.
  const Model model(Shape{1, 14, 14}, YAML::Load(kCnn), InitScheme::torch, "test");
  const Batches b = make_batches(model, {8, 8, 8, 8});
  const Trained one = train(model, b, nullptr, false, false);
  const std::vector<Trained> got = train_ranks(model, b, 2, false, false);
  CHECK(rel_diff(got[0].params, one.params) > 1e-3);
  CHECK(rel_diff(got[0].buffers, one.buffers) > 1e-2);
  CHECK(got[1].buffers != got[0].buffers);
}

TEST_CASE("fit over two ranks with device.sync_batchnorm tracks one process's losses; without it, not",
          "[sync_batchnorm][data_parallel][fit]") {
  const char* yaml = R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 16}, {type: batchnorm}, {type: relu}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9}
data: {train: {format: disc, samples: 300, seed: 4}, num_classes: 2, batch_size: 25, validation_split: 0.2}
train: {epochs: 2, seed: 3}
)";
  FitOptions fo;
  fo.device.threads = 1;
  std::ostringstream quiet;
  const FitResult one = fit(parse_config(yaml, "bn.yaml", {"device.sync_batchnorm=true"}), fo, quiet);
  for (const bool sync : {true, false}) {
    INFO("sync_batchnorm: " << sync);
    const Config cfg =
        parse_config(yaml, "bn.yaml", {std::string("device.sync_batchnorm=") + (sync ? "true" : "false")});
    const test::RankRuns runs = test::fit_on_two_thread_ranks(cfg, fo);
    const std::vector<FitResult>& got = runs.results;
    const std::vector<std::string>& errors = runs.errors;
    REQUIRE(errors[0].empty());
    REQUIRE(errors[1].empty());
    const double train_rel = std::fabs(got[0].final_train_loss - one.final_train_loss) / one.final_train_loss;
    const double val_rel = std::fabs(got[0].final_val_loss - one.final_val_loss) / one.final_val_loss;
    if (sync) {
      CHECK(train_rel < 1e-5);
      CHECK(val_rel < 1e-5);  // validation normalizes by the running statistics
    } else {
      CHECK(std::max(train_rel, val_rel) > 1e-3);
    }
  }
}

TEST_CASE("sync_batchnorm with pipeline micro-batches is refused: each micro-batch has its own statistics",
          "[sync_batchnorm][pipeline]") {
  const char* yaml = R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 8}, {type: batchnorm}, {type: relu}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
data: {train: {format: disc, samples: 64}, num_classes: 2, batch_size: 16}
pipeline: {micro_batches: 2}
device: {type: cpu, sync_batchnorm: true}
train: {epochs: 1}
)";
  FitOptions fo;
  fo.device.threads = 1;
  std::ostringstream out;
  REQUIRE_THROWS_AS(fit(parse_config(yaml, "mb.yaml", {}), fo, out), UsageError);
  REQUIRE_THROWS_WITH(fit(parse_config(yaml, "mb.yaml", {}), fo, out),
                      Catch::Contains("set pipeline.micro_batches: 1 or device.sync_batchnorm: false"));
  // One micro-batch: one replica normalizes by the whole batch anyway, and trains.
  REQUIRE(fit(parse_config(yaml, "mb.yaml", {"pipeline.micro_batches=1"}), fo, out).epochs_run == 1);
}
