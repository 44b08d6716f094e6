// The executor on the GPU with every layer of the text models (embedding, conv1d, batchnorm,
// pooling), against the CPU: a text CNN trained 4 steps with Adam, CUDA graphs on.
// Bounds, as rel = ||gpu - cpu|| / ||cpu||: parameter updates 1e-4, running statistics 1e-4,
// loss sums 1e-5. Deterministic: the whole text CNN repeats bit for bit, and a step replayed from
// a CUDA graph equals the eager step bit for bit.
// (Each layer's kernel against the CPU's is a row of the conformance table, tests/conformance/.)
#include <algorithm>
#include <cmath>
#include <cstring>

#include "lib/config/config.h"
#include "lib/model/executor.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Token ids for an embedding of `vocab` rows: a share `pad` of zeros (padding), the rest uniform.
std::vector<float> token_ids(size_t n, int64_t vocab, double pad, uint64_t seed) {
  SplitMix64 rng = SplitMix64::counter(seed);
  std::vector<float> x(n);
  for (auto& v : x) v = rng.uniform() < pad ? 0.f : float(int64_t(rng.next_u64() % uint64_t(vocab)));
  return x;
}

const char* kTextCnn = R"(model:
  input_shape: [40]
  layers:
    - {type: embedding, input_dim: 30, output_dim: 8}
    - {type: conv1d, filters: 12, kernel_size: 4, padding: same, use_bias: false}
    - {type: batchnorm}
    - {type: relu}
    - {type: maxpool1d, pool_size: 3, strides: 2, padding: same}
    - {type: conv1d, filters: 8, kernel_size: 3, activation: tanh}
    - {type: avgpool1d}
    - {type: global_avg_pool}
    - {type: batchnorm, momentum: 0.2}
    - {type: dense, units: 5}
data: {train: {format: random}, num_classes: 5}
)";

struct TextRun {
  std::vector<float> initial, params, buffers;
  MetricSums train, eval;
};

std::vector<int32_t> labels(int64_t b, uint64_t seed) {
  SplitMix64 rng = SplitMix64::counter(seed);
  std::vector<int32_t> y(static_cast<size_t>(b));
  for (auto& v : y) v = int32_t(rng.next_u64() % 5);
  return y;
}

TextRun run_text(Backend& be, const Model& model, bool deterministic, bool graphs) {
  const Optimizer opt(make_optimizer("{type: adam, lr: 0.01}"));
  ExecutorOptions o;
  o.batch_sizes = {16, 5};
  o.num_classes = 5;
  o.loss = loss_config("cross_entropy");
  o.top_k = {1};
  o.seed = 42;
  o.deterministic = deterministic;
  o.use_graphs = graphs;
  Executor ex(model, be, opt, o);
  TextRun r;
  r.initial.resize(size_t(model.param_arena_floats()));
  r.buffers.resize(size_t(std::max<int64_t>(model.buffer_arena_floats(), 1)));
  model.initialize(r.initial.data(), r.buffers.data(), 7);
  ex.upload_params(r.initial.data(), r.buffers.data());
  const int64_t in = model.input_shape().numel();
  for (int64_t t = 1; t <= 4; ++t) {
    const int64_t b = t == 4 ? 5 : 16;
    ex.train_step(b, token_ids(size_t(b * in), 30, 0.3, 500 + uint64_t(t)).data(),
                  labels(b, uint64_t(t)).data(), t, 0.01f);
  }
  r.train = ex.read_metrics();
  ex.reset_metrics();
  for (int i = 0; i < 3; ++i)  // eager, captured, replayed
    ex.eval_step(16, token_ids(size_t(16 * in), 30, 0.3, 99).data(), labels(16, 99).data());
  r.eval = ex.read_metrics();
  std::vector<float> params(r.initial.size());
  ex.download_params(params.data(), r.buffers.data());
  // The tensors only (the alignment padding of the arenas is never written).
  std::vector<float> init, p;
  for (const TensorSlot& s : model.params()) {
    init.insert(init.end(), r.initial.begin() + s.offset, r.initial.begin() + s.offset + s.shape.numel());
    p.insert(p.end(), params.begin() + s.offset, params.begin() + s.offset + s.shape.numel());
  }
  std::vector<float> buffers;
  for (const TensorSlot& s : model.buffers())
    buffers.insert(buffers.end(), r.buffers.begin() + s.offset,
                   r.buffers.begin() + s.offset + s.shape.numel());
  r.initial = init;
  r.params = p;
  r.buffers = buffers;
  return r;
}

std::vector<float> deltas(const TextRun& r) {
  std::vector<float> d(r.params.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = r.params[i] - r.initial[i];
  return d;
}

}  // namespace

TEST_CASE("gpu executor trains a text CNN with every new layer like the CPU", "[gpu][executor]") {
  Config c = parse_config(kTextCnn, "text.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  const TextRun cpu = run_text(cpu_backend(), model, false, false);
  const TextRun gpu = run_text(cuda_backend(), model, true, true);
  const double ed = rel_error(deltas(gpu), deltas(cpu)), eb = rel_error(gpu.buffers, cpu.buffers);
  INFO("parameter update rel error " << ed << ", running statistics rel error " << eb << "; train loss cpu "
                                     << cpu.train.loss_sum << " gpu " << gpu.train.loss_sum);
  CHECK(ed < 1e-4);
  CHECK(eb < 1e-4);
  CHECK(std::abs(gpu.train.loss_sum - cpu.train.loss_sum) <= 1e-5 * std::abs(cpu.train.loss_sum));
  CHECK(std::abs(gpu.eval.loss_sum - cpu.eval.loss_sum) <= 1e-5 * std::abs(cpu.eval.loss_sum));
  CHECK(gpu.train.samples == 53);
  CHECK(gpu.eval.samples == 48);
  // Deterministic: a second run, and a run without CUDA graphs, are bit-identical.
  const TextRun again = run_text(cuda_backend(), model, true, true);
  const TextRun eager = run_text(cuda_backend(), model, true, false);
  CHECK(same_bits(again.params, gpu.params));
  CHECK(same_bits(again.buffers, gpu.buffers));
  CHECK(same_bits(eager.params, gpu.params));
  CHECK(same_bits(eager.buffers, gpu.buffers));
  CHECK(eager.train.loss_sum == gpu.train.loss_sum);
  CHECK(eager.eval.loss_sum == gpu.eval.loss_sum);
}
