// The CUDA kernels of embedding, conv1d, maxpool1d/avgpool1d, global_avg_pool and batchnorm
// against the CPU (oneDNN / own) kernels on the same data, strict fp32: forward y, backward dx,
// parameter gradients and (batchnorm) the running statistics in the buffers slice.
// Bounds, as rel = ||gpu - cpu|| / ||cpu|| per tensor:
//   embedding: y and dx (zero) bit-identical, dW 1e-5 (a fixed-order sum of the same numbers)
//   conv1d: 1e-4 (cuDNN, like conv2d)     pooling, global_avg_pool: 1e-5
//   maxpool1d with ties: y and dx bit-identical (the first maximum takes the gradient)
//   batchnorm: y and running statistics 1e-5, dx, dgamma, dbeta 1e-4 (the CPU sums in float,
//     the GPU in double; 64,000 values per channel in the largest case)
//   executor (a text CNN with every new layer, 4 steps with Adam, CUDA graphs on): parameter
//     updates 1e-4, running statistics 1e-4, loss sums 1e-5
// Deterministic: embedding's dW, batchnorm and the whole text CNN repeat bit for bit, and a
// step replayed from a CUDA graph equals the eager step bit for bit.
// Gradient and dx buffers start filled with 1e3: backward must overwrite them.
#include <algorithm>
#include <cmath>
#include <limits>

#include "lib/config/config.h"
#include "lib/model/executor.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;

namespace {

struct KernelRun {
  std::vector<float> y, dx, grads, buffers;
};

// Creates the layer's kernel on `be`, runs `forwards` forward passes (each one updates running
// statistics when training) and one backward pass, and reads everything back.
KernelRun run_kernel(Backend& be, const Layer& l, int64_t batch, const std::vector<float>& x,
                     const std::vector<float>& params, const std::vector<float>& buffers,
                     const std::vector<float>& dy, bool training, bool with_dx = true,
                     int forwards = 1) {
  KernelContext ctx;
  ctx.backend = &be;
  ctx.batch = batch;
  ctx.math = MathMode::strict_fp32;
  ctx.deterministic = true;
  auto kernel = Registry::global().make_kernel(be.name(), l, ctx);
  const size_t n_in = size_t(batch * l.input_shape().numel());
  const size_t n_out = size_t(batch * l.output_shape().numel());
  Buffer xb(be, n_in * 4), dxb(be, n_in * 4), yb(be, n_out * 4), dyb(be, n_out * 4);
  Buffer pb(be, params.size() * 4), gb(be, params.size() * 4), bb(be, buffers.size() * 4);
  Buffer ws(be, kernel->workspace_bytes());
  xb.upload(x);
  dyb.upload(dy);
  if (!params.empty()) {
    pb.upload(params);
    gb.fill(1e3f, params.size());
  }
  if (!buffers.empty()) bb.upload(buffers);
  dxb.fill(1e3f, n_in);
  kernel->bind(params.empty() ? nullptr : pb.as(), params.empty() ? nullptr : gb.as(),
               buffers.empty() ? nullptr : bb.as(), ws.get());
  for (int i = 0; i < forwards; ++i) kernel->forward(xb.as(), yb.as(), training);
  kernel->backward(xb.as(), yb.as(), dyb.as(), with_dx ? dxb.as() : nullptr);
  KernelRun r;
  r.y = yb.download(n_out);
  if (with_dx) r.dx = dxb.download(n_in);
  r.grads = unpadded(l, gb.download(params.size()));
  r.buffers = bb.download(buffers.size());
  return r;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Random data on both backends; y, dx and parameter gradients within `bound`, and the same
// parameter gradients without dx (first layer).
void compare_layer(const std::string& yaml, const Shape& in, int64_t batch, double bound,
                   uint64_t seed = 1) {
  INFO("layer " << yaml << " on input " << in.batched_str() << ", batch " << batch);
  auto l = make_layer(yaml, in);
  const size_t n_in = size_t(batch * in.numel()), n_out = size_t(batch * l->output_shape().numel());
  const std::vector<float> x = random_vector(n_in, seed, -2.f, 2.f);
  const std::vector<float> dy = random_vector(n_out, seed + 1);
  const std::vector<float> params = random_vector(size_t(param_slice_floats(*l)), seed + 2, -0.5f, 0.5f);
  const KernelRun cpu = run_kernel(cpu_backend(), *l, batch, x, params, {}, dy, true);
  const KernelRun gpu = run_kernel(cuda_backend(), *l, batch, x, params, {}, dy, true);
  const double ey = rel_error(gpu.y, cpu.y), edx = rel_error(gpu.dx, cpu.dx);
  INFO("rel error y " << ey << ", dx " << edx);
  CHECK(ey < bound);
  CHECK(edx < bound);
  if (!params.empty()) {
    const double eg = rel_error(gpu.grads, cpu.grads);
    INFO("rel error param grads " << eg);
    CHECK(eg < bound);
    const KernelRun no_dx = run_kernel(cuda_backend(), *l, batch, x, params, {}, dy, true, false);
    CHECK(same_bits(no_dx.grads, gpu.grads));
  }
}

// Token ids for an embedding of `vocab` rows: a share `pad` of zeros (padding), the rest uniform.
std::vector<float> token_ids(size_t n, int64_t vocab, double pad, uint64_t seed) {
  SplitMix rng(seed);
  std::vector<float> x(n);
  for (auto& v : x) v = rng.uniform() < pad ? 0.f : float(int64_t(rng.next() % uint64_t(vocab)));
  return x;
}

void compare_embedding(int64_t vocab, int64_t dim, int64_t length, int64_t batch,
                       std::vector<float> x) {
  const std::string yaml = "{type: embedding, input_dim: " + std::to_string(vocab) +
                           ", output_dim: " + std::to_string(dim) + "}";
  INFO(yaml << " on length " << length << ", batch " << batch);
  auto l = make_layer(yaml, Shape{length});
  const size_t n_out = size_t(batch * dim * length);
  const std::vector<float> dy = random_vector(n_out, 77);
  const std::vector<float> params = random_vector(size_t(param_slice_floats(*l)), 78);
  const KernelRun cpu = run_kernel(cpu_backend(), *l, batch, x, params, {}, dy, true);
  const KernelRun gpu = run_kernel(cuda_backend(), *l, batch, x, params, {}, dy, true);
  CHECK(same_bits(gpu.y, cpu.y));
  CHECK(gpu.dx == std::vector<float>(x.size(), 0.f));
  const double eg = rel_error(gpu.grads, cpu.grads);
  INFO("rel error dW " << eg);
  CHECK(eg < 1e-5);
  // Rows of ids that do not occur are exactly zero (the buffer held 1e3).
  std::vector<bool> used(size_t(vocab), false);
  for (float v : x) {
    const int64_t id = !(v > 0.f) ? 0 : (v >= float(vocab - 1) ? vocab - 1 : int64_t(v));
    used[size_t(id)] = true;
  }
  size_t wrong = 0;
  for (int64_t id = 0; id < vocab; ++id)
    if (!used[size_t(id)])
      for (int64_t d = 0; d < dim; ++d) wrong += gpu.grads[size_t(id * dim + d)] != 0.f;
  CHECK(wrong == 0);
  // Deterministic, and the same without dx.
  const KernelRun again = run_kernel(cuda_backend(), *l, batch, x, params, {}, dy, true, false);
  CHECK(same_bits(again.grads, gpu.grads));
}

}  // namespace

TEST_CASE("gpu embedding matches the CPU (gather, clamped ids, zero dx, deterministic dW)", "[gpu][layers]") {
  // Padding-heavy text: the id 0 fills ~60% of 2,400 positions, so its run crosses many chunks.
  {
    std::vector<float> x = token_ids(8 * 300, 50, 0.6, 5);
    // Ids the CPU clamps: negative, fractional, too large, NaN, -0.
    x[3] = -3.f;
    x[10] = 2.5f;
    x[11] = 50.f;
    x[400] = 1e9f;
    x[401] = std::numeric_limits<float>::quiet_NaN();
    x[999] = -0.f;
    x[2399] = 49.5f;
    compare_embedding(50, 8, 300, 8, x);
  }
  compare_embedding(6, 4, 5, 2, token_ids(10, 6, 0.2, 6));
  compare_embedding(1000, 7, 40, 3, token_ids(120, 1000, 0.0, 7));  // D = 7: odd thread layout
  compare_embedding(30, 33, 64, 5, std::vector<float>(320, 12.f));  // one id everywhere
  compare_embedding(1, 3, 9, 2, token_ids(18, 1, 0.5, 8));          // a vocabulary of one
}

TEST_CASE("gpu conv1d matches the CPU (valid, same, asymmetric same, strided, explicit)", "[gpu][layers]") {
  const double bound = 1e-4;
  compare_layer("{type: conv1d, filters: 16, kernel_size: 3, padding: same}", Shape{4, 20}, 3, bound);
  compare_layer("{type: conv1d, filters: 16, kernel_size: 5}", Shape{4, 30}, 2, bound);
  // Even kernel with "same": pads (1, 2), which cuDNN cannot describe.
  compare_layer("{type: conv1d, filters: 8, kernel_size: 4, padding: same}", Shape{3, 17}, 3, bound);
  // Stride 2 with "same" on an even length: pads (0, 1).
  compare_layer("{type: conv1d, filters: 16, kernel_size: 3, strides: 2, padding: same}", Shape{4, 20}, 2, bound);
  compare_layer("{type: conv1d, filters: 8, kernel_size: 2, strides: 3, use_bias: false}", Shape{5, 23}, 2, bound);
  // W of 126 floats: the bias sits in the next 64-float slot (128).
  compare_layer("{type: conv1d, filters: 6, kernel_size: 3, padding: 2}", Shape{7, 11}, 4, bound);
  compare_layer("{type: conv1d, filters: 64, kernel_size: 5}", Shape{7, 300}, 4, bound);  // reuters
}

TEST_CASE("gpu maxpool1d and avgpool1d match the CPU (symmetric and asymmetric padding)", "[gpu][layers]") {
  const double bound = 1e-5;
  for (const char* type : {"maxpool1d", "avgpool1d"}) {
    const std::string t = type;
    compare_layer("{type: " + t + "}", Shape{3, 16}, 2, bound);
    compare_layer("{type: " + t + ", pool_size: 3, strides: 2, padding: same}", Shape{3, 16}, 2, bound);  // (0, 1)
    compare_layer("{type: " + t + ", pool_size: 2, strides: 1, padding: same}", Shape{3, 9}, 3, bound);   // (0, 1)
    compare_layer("{type: " + t + ", pool_size: 3, strides: 1, padding: same}", Shape{2, 15}, 3, bound);  // (1, 1)
    compare_layer("{type: " + t + ", pool_size: 3, strides: 2, padding: 1}", Shape{2, 13}, 2, bound);
    compare_layer("{type: " + t + ", pool_size: 4, strides: 3}", Shape{4, 19}, 2, bound);
  }
}

TEST_CASE("gpu maxpool1d routes tied gradients to the first maximum like the CPU", "[gpu][layers]") {
  for (const char* yaml : {"{type: maxpool1d, pool_size: 3, strides: 1, padding: same}",
                           "{type: maxpool1d, pool_size: 4, strides: 2, padding: same}"}) {
    INFO(yaml);
    auto l = make_layer(yaml, Shape{3, 20});
    const int64_t batch = 3;
    const size_t n_in = size_t(batch * 60), n_out = size_t(batch * l->output_shape().numel());
    std::vector<float> x = random_vector(n_in, 31, 0.f, 3.f);
    for (auto& v : x) v = std::floor(v);  // 0, 1 or 2: most windows hold ties
    const std::vector<float> dy = random_vector(n_out, 32);
    const KernelRun cpu = run_kernel(cpu_backend(), *l, batch, x, {}, {}, dy, true);
    const KernelRun gpu = run_kernel(cuda_backend(), *l, batch, x, {}, {}, dy, true);
    CHECK(same_bits(gpu.y, cpu.y));
    CHECK(same_bits(gpu.dx, cpu.dx));
  }
}

TEST_CASE("gpu global_avg_pool matches the CPU on 1-D, 2-D and 3-D inputs", "[gpu][layers]") {
  const double bound = 1e-5;
  compare_layer("{type: global_avg_pool}", Shape{5, 17}, 3, bound);
  compare_layer("{type: global_avg_pool}", Shape{3, 6, 7}, 4, bound);
  compare_layer("{type: global_avg_pool}", Shape{2, 3, 4, 5}, 2, bound);
  compare_layer("{type: global_avg_pool}", Shape{64, 1}, 3, bound);
  compare_layer("{type: global_avg_pool}", Shape{8, 56, 56}, 2, bound);
}

namespace {

struct BnData {
  std::unique_ptr<Layer> layer;
  int64_t batch;
  std::vector<float> x, dy, params, buffers;
};

BnData bn_data(const std::string& yaml, const Shape& in, int64_t batch, uint64_t seed) {
  BnData d;
  d.layer = make_layer(yaml, in);
  d.batch = batch;
  const size_t n = size_t(batch * in.numel());
  const int64_t C = in[0], slot = param_slot_floats(C);
  d.x = random_vector(n, seed, -1.f, 3.f);  // mean 1: the variance must not lose it
  d.dy = random_vector(n, seed + 1);
  d.params.assign(size_t(2 * slot), 0.f);
  const std::vector<float> gamma = random_vector(size_t(C), seed + 2, 0.5f, 1.5f);
  const std::vector<float> beta = random_vector(size_t(C), seed + 3, -0.5f, 0.5f);
  std::copy(gamma.begin(), gamma.end(), d.params.begin());
  std::copy(beta.begin(), beta.end(), d.params.begin() + slot);
  const std::vector<float> mean = random_vector(size_t(C), seed + 4, -0.5f, 0.5f);
  const std::vector<float> var = random_vector(size_t(C), seed + 5, 0.5f, 1.5f);
  d.buffers = mean;
  d.buffers.insert(d.buffers.end(), var.begin(), var.end());
  return d;
}

void compare_batchnorm(const std::string& yaml, const Shape& in, int64_t batch, uint64_t seed) {
  INFO("layer " << yaml << " on input " << in.batched_str() << ", batch " << batch);
  const BnData d = bn_data(yaml, in, batch, seed);
  const Layer& l = *d.layer;
  for (bool training : {true, false}) {
    INFO((training ? "training" : "eval"));
    // Training: two forward passes, so the running statistics move twice.
    const int forwards = training ? 2 : 1;
    const KernelRun cpu = run_kernel(cpu_backend(), l, batch, d.x, d.params, d.buffers, d.dy, training, true, forwards);
    const KernelRun gpu = run_kernel(cuda_backend(), l, batch, d.x, d.params, d.buffers, d.dy, training, true, forwards);
    const double ey = rel_error(gpu.y, cpu.y), edx = rel_error(gpu.dx, cpu.dx),
                 eg = rel_error(gpu.grads, cpu.grads), eb = rel_error(gpu.buffers, cpu.buffers);
    INFO("rel error y " << ey << ", dx " << edx << ", dgamma/dbeta " << eg << ", running stats " << eb);
    CHECK(ey < 1e-5);
    CHECK(edx < 1e-4);
    CHECK(eg < 1e-4);
    CHECK(eb < 1e-5);
    if (training)
      CHECK(!same_bits(gpu.buffers, d.buffers));
    else
      CHECK(same_bits(gpu.buffers, d.buffers));  // eval updates nothing
    // First layer (no dx): the same gamma and beta gradients; and every run repeats bit for bit.
    const KernelRun no_dx = run_kernel(cuda_backend(), l, batch, d.x, d.params, d.buffers, d.dy, training, false, forwards);
    CHECK(same_bits(no_dx.grads, gpu.grads));
    CHECK(same_bits(no_dx.y, gpu.y));
    CHECK(same_bits(no_dx.buffers, gpu.buffers));
    const KernelRun cpu_no_dx = run_kernel(cpu_backend(), l, batch, d.x, d.params, d.buffers, d.dy, training, false, forwards);
    CHECK(rel_error(no_dx.grads, cpu_no_dx.grads) < 1e-4);
  }
}

}  // namespace

TEST_CASE("gpu batchnorm matches the CPU in training and eval mode, running statistics included", "[gpu][layers]") {
  compare_batchnorm("{type: batchnorm}", Shape{12}, 6, 301);
  compare_batchnorm("{type: batchnorm, momentum: 0.2}", Shape{3, 15}, 4, 302);
  compare_batchnorm("{type: batchnorm, epsilon: 0.001}", Shape{4, 5, 6}, 3, 303);
  compare_batchnorm("{type: batchnorm, momentum: 0.01}", Shape{2, 3, 4, 5}, 2, 304);
  compare_batchnorm("{type: batchnorm}", Shape{70}, 1, 305);     // n = 1: var 0, no unbiasing
  compare_batchnorm("{type: batchnorm}", Shape{8, 4000}, 16, 306);  // 64,000 per channel: 16 pieces
  compare_batchnorm("{type: batchnorm}", Shape{300}, 64, 307);   // many channels, few values
}

// ---- The executor with every new layer ----

namespace {

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
  SplitMix rng(seed);
  std::vector<int32_t> y(static_cast<size_t>(b));
  for (auto& v : y) v = int32_t(rng.next() % 5);
  return y;
}

TextRun run_text(Backend& be, const Model& model, bool deterministic, bool graphs) {
  const Optimizer opt(make_optimizer("{type: adam, lr: 0.01}"));
  ExecutorOptions o;
  o.batch_sizes = {16, 5};
  o.num_classes = 5;
  o.loss = LossKind::cross_entropy_logits;
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
    ex.train_step(b, token_ids(size_t(b * in), 30, 0.3, 500 + uint64_t(t)).data(), labels(b, uint64_t(t)).data(), t, 0.01f);
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
    buffers.insert(buffers.end(), r.buffers.begin() + s.offset, r.buffers.begin() + s.offset + s.shape.numel());
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
  INFO("parameter update rel error " << ed << ", running statistics rel error " << eb
                                     << "; train loss cpu " << cpu.train.loss_sum << " gpu "
                                     << gpu.train.loss_sum);
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
