// The executor and the whole training path on the CUDA backend:
//   - a small CNN (asymmetric "same" conv and pooling, relu/tanh/gelu, dropout, dense) trained
//     four steps (two batch sizes) on both backends: the parameter updates agree within
//     rel 1e-4, train/eval loss sums within rel 1e-5, top-k and confusion counts exactly;
//   - with --deterministic, two GPU runs give bit-identical parameters;
//   - dense/conv2d kernels read the bias where Model puts it (64-float slots);
//   - the allocator cap (--mem-limit) is honoured by a real CudaBackend and the executor; growth
//     mode (--mem-growth) stays under the cap; a device that is itself full is reported;
//   - fit() on the GPU tracks fit() on the CPU;
//   - only the largest batch size of a plan times convolution algorithms.
#include <cmath>
#include <fstream>
#include <sstream>

#include "kernels/cuda/algo_disk_cache.h"
#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/model/executor.h"
#include "lib/train/fit.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;
using Catch::Contains;

namespace {

constexpr size_t MiB = size_t(1) << 20;

const char* kCnn = R"(model:
  input_shape: [1, 12, 12]
  layers:
    - {type: conv2d, filters: 4, kernel_size: 4, padding: same, activation: relu}
    - {type: maxpool2d}
    - {type: conv2d, filters: 8, kernel_size: 2, padding: same}
    - {type: tanh}
    - {type: avgpool2d, pool_size: 3, strides: 2, padding: same}
    - {type: dropout, rate: 0.25}
    - {type: flatten}
    - {type: dense, units: 16, activation: gelu}
    - {type: dense, units: 8}
data: {train: {format: random}, num_classes: 8}
)";

struct ExecRun {
  std::vector<float> initial, params;
  MetricSums train, eval;
};

ExecRun run_executor(Backend& be, const Model& model, const std::string& optimizer, bool deterministic,
                     float clip = 0.f, ClipRecord* clip_out = nullptr) {
  const Optimizer opt(make_optimizer(optimizer));
  ExecutorOptions o;
  o.batch_sizes = {16, 5};
  o.num_classes = 8;
  o.loss = loss_config("cross_entropy");
  o.top_k = {1, 3};
  o.seed = 42;
  o.deterministic = deterministic;
  o.clip_grad_norm = clip;
  Executor ex(model, be, opt, o);
  ExecRun r;
  r.initial.resize(size_t(model.param_arena_floats()));
  std::vector<float> buffers(size_t(std::max<int64_t>(model.buffer_arena_floats(), 1)));
  model.initialize(r.initial.data(), buffers.data(), 7);
  ex.upload_params(r.initial.data(), buffers.data());
  const int64_t in = model.input_shape().numel();
  auto labels = [](int64_t b, uint64_t seed) {
    SplitMix64 rng = SplitMix64::counter(seed);
    std::vector<int32_t> y(static_cast<size_t>(b));
    for (auto& v : y) v = int32_t(rng.next_u64() % 8);
    return y;
  };
  for (int64_t t = 1; t <= 4; ++t) {
    const int64_t b = t == 4 ? 5 : 16;
    const std::vector<float> x = random_vector(size_t(b * in), 1000 + uint64_t(t));
    ex.train_step(b, x.data(), labels(b, uint64_t(t)).data(), t, 0.05f);
  }
  r.train = ex.read_metrics();
  if (clip_out) *clip_out = ex.read_clip_record();
  ex.reset_metrics();
  const std::vector<float> x = random_vector(size_t(16 * in), 99);
  ex.eval_step(16, x.data(), labels(16, 99).data());
  r.eval = ex.read_metrics();
  r.params.resize(r.initial.size());
  ex.download_params(r.params.data(), nullptr);
  // Keep the tensors only: the executor never writes the gradient arena's alignment padding, so
  // whatever memory held before turns into (harmless) Adam updates of the padding there.
  std::vector<float> init, params;
  for (const TensorSlot& s : model.params()) {
    init.insert(init.end(), r.initial.begin() + s.offset, r.initial.begin() + s.offset + s.shape.numel());
    params.insert(params.end(), r.params.begin() + s.offset, r.params.begin() + s.offset + s.shape.numel());
  }
  r.initial = init;
  r.params = params;
  return r;
}

std::vector<float> deltas(const ExecRun& r) {
  std::vector<float> d(r.params.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = r.params[i] - r.initial[i];
  return d;
}

}  // namespace

TEST_CASE("gpu executor trains a small CNN like the CPU", "[gpu][executor]") {
  Config c = parse_config(kCnn, "cnn.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  for (const char* optimizer :
       {"{type: sgd, lr: 0.05, momentum: 0.9, nesterov: true}", "{type: adam, lr: 0.01}"}) {
    INFO("optimizer " << optimizer);
    const ExecRun cpu = run_executor(cpu_backend(), model, optimizer, false);
    const ExecRun gpu = run_executor(cuda_backend(), model, optimizer, true);
    const double ed = rel_error(deltas(gpu), deltas(cpu));
    INFO("parameter update rel error " << ed << "; train loss cpu " << cpu.train.loss_sum << " gpu "
                                       << gpu.train.loss_sum);
    CHECK(ed < 1e-4);
    CHECK(std::abs(gpu.train.loss_sum - cpu.train.loss_sum) <= 1e-5 * std::abs(cpu.train.loss_sum));
    CHECK(std::abs(gpu.eval.loss_sum - cpu.eval.loss_sum) <= 1e-5 * std::abs(cpu.eval.loss_sum));
    CHECK(gpu.train.samples == 53);
    CHECK(gpu.train.topk == cpu.train.topk);
    CHECK(gpu.eval.topk == cpu.eval.topk);
    CHECK(gpu.eval.confusion == cpu.eval.confusion);
  }
}

TEST_CASE("gpu clip_grad_norm clips like the CPU, on the device, inside the step's CUDA graph",
          "[gpu][executor][clip]") {
  Config c = parse_config(kCnn, "cnn.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  const char* optimizer = "{type: sgd, lr: 0.05, momentum: 0.9}";
  ClipRecord cpu_clip, gpu_clip;
  const ExecRun cpu = run_executor(cpu_backend(), model, optimizer, false, 0.05f, &cpu_clip);
  CudaBackend& be = cuda_backend();
  const size_t graphs_before = be.graph_count();
  const ExecRun gpu = run_executor(be, model, optimizer, true, 0.05f, &gpu_clip);
  // Steps 1-3 at batch 16 run eagerly, are recorded, then replayed; the eval step likewise once.
  CHECK(be.graph_count() > graphs_before);
  INFO("norms of the last step: cpu " << cpu_clip.last_norm << " gpu " << gpu_clip.last_norm);
  CHECK(cpu_clip.clipped_steps == 4);
  CHECK(gpu_clip.clipped_steps == 4);
  CHECK(std::abs(gpu_clip.last_norm - cpu_clip.last_norm) <= 1e-4 * cpu_clip.last_norm);
  CHECK(std::abs(gpu_clip.last_scale - cpu_clip.last_scale) <= 1e-4 * cpu_clip.last_scale);
  const double ed = rel_error(deltas(gpu), deltas(cpu));
  INFO("parameter update rel error " << ed);
  CHECK(ed < 1e-4);
}

TEST_CASE("gpu plans time convolution algorithms for the largest batch size only", "[gpu][executor]") {
  // The last partial batch (5 rows) takes cuDNN's heuristic choices (KernelContext::measure):
  // measured choices go to the disk cache, so batch 16's shape is there and batch 5's is not. A
  // shape no other test uses (7 channels of 9 x 9), so neither came from another test's plan.
  const std::string path = cuda::conv_algo_cache().path();
  if (path.empty()) {
    WARN("the algorithm cache is off (TRAINER_CACHE_DIR=off): nothing to look at");
    return;
  }
  Config c = parse_config(R"(model:
  input_shape: [7, 9, 9]
  layers:
    - {type: conv2d, filters: 6, kernel_size: 3, padding: same}
    - {type: flatten}
    - {type: dense, units: 8}
data: {train: {format: random}, num_classes: 8}
)",
                          "measure.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  const Optimizer opt(make_optimizer("{type: sgd}"));
  ExecutorOptions o;
  o.batch_sizes = {5, 16};
  o.num_classes = 8;
  o.math = MathMode::strict_fp32;
  Executor ex(model, cuda_backend(), opt, o);
  std::ifstream in(path);
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  INFO(path);
  CHECK_THAT(text.str(), Contains(" nchw 16,7,9,9,6,3,3,"));
  CHECK_THAT(text.str(), !Contains(" nchw 5,7,9,9,6,3,3,"));
  // Both sizes train: the heuristic choices run forward and backward.
  const int64_t in_floats = model.input_shape().numel();
  std::vector<float> params(size_t(model.param_arena_floats())), buffers(1);
  model.initialize(params.data(), buffers.data(), 3);
  ex.upload_params(params.data(), buffers.data());
  for (int64_t b : {16, 5}) {
    const std::vector<float> x = random_vector(size_t(b * in_floats), 9 + uint64_t(b));
    std::vector<int32_t> y(static_cast<size_t>(b));
    for (size_t i = 0; i < y.size(); ++i) y[i] = int32_t(i % 8);
    ex.train_step(b, x.data(), y.data(), 1, 0.01f);
  }
  ex.download_params(params.data(), nullptr);
  for (float v : params) REQUIRE(std::isfinite(v));
}

TEST_CASE("gpu executor with deterministic algorithms repeats bit for bit", "[gpu][executor]") {
  Config c = parse_config(kCnn, "cnn.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  const ExecRun a = run_executor(cuda_backend(), model, "{type: adam, lr: 0.01}", true);
  const ExecRun b = run_executor(cuda_backend(), model, "{type: adam, lr: 0.01}", true);
  CHECK(a.params == b.params);
  CHECK(a.train.loss_sum == b.train.loss_sum);
}

// Backend::upload_inputs through the landing zone: pieces of odd sizes (not multiples of 16
// bytes; one destination 4 bytes off a 16-byte boundary) arrive whole and in place, repeatedly,
// with each host source overwritten as soon as the call returns, and nothing around them written.
TEST_CASE("gpu staged uploads put every piece in place", "[gpu][executor][upload]") {
  CudaBackend& be = cuda_backend();
  REQUIRE(be.stages_uploads());
  const size_t sizes[3] = {4, 52, 1000004};
  size_t total = 0;
  for (size_t n : sizes) total += n + 64;
  Buffer dst(be, total), landing(be, total);
  constexpr float kPoison = -7.5f;
  dst.fill(kPoison, total / 4);
  std::vector<float> src[3];
  Backend::UploadPiece pieces[3];
  size_t at[3], off = 0;
  for (int round = 0; round < 3; ++round) {
    off = 0;
    for (int i = 0; i < 3; ++i) {
      at[i] = off + (i == 1 ? 4 : 0);  // piece 1 lands 4 bytes off a 16-byte boundary
      src[i] = random_vector(sizes[i] / 4, 100 * uint64_t(round) + uint64_t(i));
      pieces[i] = {dst.as<char>() + at[i], src[i].data(), sizes[i]};
      off = align_up(at[i] + sizes[i] + 32, 16);
    }
    be.upload_inputs(pieces, 3, landing.get());
    std::vector<float> expect[3];
    for (int i = 0; i < 3; ++i) {
      expect[i] = src[i];
      std::fill(src[i].begin(), src[i].end(), 1e30f);  // the host reuses its buffers at once
    }
    const std::vector<float> got = dst.download(total / 4);
    for (int i = 0; i < 3; ++i) {
      INFO("round " << round << ", piece " << i << " of " << sizes[i] << " bytes");
      const std::vector<float> piece(got.begin() + int64_t(at[i] / 4),
                                     got.begin() + int64_t((at[i] + sizes[i]) / 4));
      CHECK(piece == expect[i]);
      CHECK(got[(at[i] + sizes[i]) / 4] == kPoison);  // the word after the piece
    }
    CHECK(got[1] == kPoison);  // between pieces 0 and 1
  }
}

// Steps whose uploads overlap the step before (the host's batch buffer rewritten right after each
// train_step returns, never waiting) equal steps with the device drained after each one, bit for bit.
TEST_CASE("gpu steps with overlapped uploads equal steps one at a time", "[gpu][executor][upload]") {
  Config c = parse_config(kCnn, "cnn.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  const Optimizer opt(make_optimizer("{type: adam, lr: 0.01}"));
  const int64_t in = model.input_shape().numel(), b = 64;
  auto run = [&](bool drain) {
    ExecutorOptions o;
    o.batch_sizes = {b};
    o.num_classes = 8;
    o.loss = loss_config("cross_entropy");
    o.seed = 3;
    o.deterministic = true;
    CudaBackend& be = cuda_backend();
    Executor ex(model, be, opt, o);
    std::vector<float> init(size_t(model.param_arena_floats()));
    std::vector<float> buffers(size_t(std::max<int64_t>(model.buffer_arena_floats(), 1)));
    model.initialize(init.data(), buffers.data(), 7);
    ex.upload_params(init.data(), buffers.data());
    std::vector<float> x(size_t(b * in));
    std::vector<int32_t> y(static_cast<size_t>(b));
    for (int64_t t = 1; t <= 12; ++t) {
      const std::vector<float> fresh = random_vector(x.size(), 500 + uint64_t(t));
      std::copy(fresh.begin(), fresh.end(), x.begin());
      for (size_t i = 0; i < y.size(); ++i) y[i] = int32_t((i * 7 + size_t(t)) % 8);
      ex.train_step(b, x.data(), y.data(), t, 0.01f);
      if (drain) be.synchronize();
    }
    std::vector<float> params(init.size());
    ex.download_params(params.data(), nullptr);
    std::vector<float> kept;
    for (const TensorSlot& s : model.params())
      kept.insert(kept.end(), params.begin() + s.offset, params.begin() + s.offset + s.shape.numel());
    return std::make_pair(kept, ex.read_metrics().loss_sum);
  };
  const auto overlapped = run(false), drained = run(true);
  CHECK(overlapped.first == drained.first);
  CHECK(overlapped.second == drained.second);
}

TEST_CASE("gpu dense and conv2d kernels read the bias from Model's slot", "[gpu][executor]") {
  // Weights of 15 and 12 floats: the bias slot starts at float 64 of the layer's slice.
  for (const char* yaml :
       {"model: {input_shape: [3], layers: [{type: dense, units: 5}]}\n",
        "model: {input_shape: [1, 3, 3], layers: [{type: conv2d, filters: 3, kernel_size: 2}]}\n"}) {
    INFO(yaml);
    Config c =
        parse_config(std::string(yaml) + "data: {train: {format: random}, num_classes: 5}\n", "b.yaml", {});
    Model model(c.input_shape, c.layers, c.init, c.file);
    const TensorSlot& bias = model.params().at(1);
    REQUIRE(bias.offset == 64);
    const Optimizer opt(make_optimizer("{type: sgd}"));
    ExecutorOptions o;
    o.batch_sizes = {2};
    o.num_classes = 5;
    Executor ex(model, cuda_backend(), opt, o);
    std::vector<float> params(size_t(model.param_arena_floats()), 0.f), buffers(1, 0.f);
    for (int64_t i = 0; i < bias.shape.numel(); ++i) params[size_t(bias.offset + i)] = float(i + 1);
    ex.upload_params(params.data(), buffers.data());
    const int64_t in = model.input_shape().numel(), out = model.output_shape().numel();
    const std::vector<float> x = random_vector(size_t(2 * in), 3);
    std::vector<float> y(size_t(2 * out));
    ex.predict(2, x.data(), y.data());
    const int64_t per_channel = out / bias.shape.numel();
    for (size_t i = 0; i < y.size(); ++i)
      CHECK(y[i] == float(int64_t(i) % out / per_channel + 1));  // W = 0: y = bias
  }
}

TEST_CASE("gpu memory cap is honoured by the backend and the executor", "[gpu][memory]") {
  DeviceRequest req;
  req.mem_limit_bytes = 64 * MiB;
  CudaBackend be(0, req);
  CHECK(be.allocator().cap_bytes() == 64 * MiB);
  // The cuBLAS workspace (an eighth of the cap); the loss kernel's block sums are the executor's.
  CHECK(be.allocator().bytes_in_use() == 8 * MiB);
  try {
    be.allocator().allocate(100 * MiB, "a test tensor");
    FAIL("expected OutOfMemoryError");
  } catch (const OutOfMemoryError& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Contains("a test tensor") && Contains("requested 100.00 MiB") &&
                      Contains("in use 8.00 MiB") && Contains("cap 64.00 MiB") && Contains("gpu:0"));
  }
  CHECK(be.device_allocator().reserved_bytes() <= 64 * MiB);

  Config c = parse_config(kCnn, "cnn.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  const Optimizer opt(make_optimizer("{type: adam}"));
  ExecutorOptions o;
  o.batch_sizes = {20000};
  o.num_classes = 8;
  std::string message;
  try {
    Executor ex(model, be, opt, o);
  } catch (const OutOfMemoryError& e) {
    message = e.what();
  }
  INFO(message);
  REQUIRE_THAT(message, Contains("activations") && Contains("cap 64.00 MiB") &&
                            Contains("largest batch size that would fit is about"));
  const int64_t fit = std::stoll(message.substr(message.rfind("about ") + 6));
  REQUIRE(fit >= 2);
  CHECK(be.allocator().peak_bytes() <= 64 * MiB);
  CHECK(be.device_allocator().peak_reserved_bytes() <= 64 * MiB);
  // A fresh backend (the failed executor does not hand back what it had allocated) takes half.
  CudaBackend again(0, req);
  o.batch_sizes = {fit / 2};
  REQUIRE_NOTHROW(Executor(model, again, opt, o));
  CHECK(again.device_allocator().peak_reserved_bytes() <= 64 * MiB);
}

TEST_CASE("gpu memory growth obtains chunks under the cap", "[gpu][memory]") {
  DeviceRequest req;
  req.mem_limit_bytes = 256 * MiB;
  req.mem_growth = true;
  CudaBackend be(0, req);
  CappedDeviceAllocator& a = be.device_allocator();
  // The backend's own: the cuBLAS workspace (an eighth of the cap).
  const size_t own = 32 * MiB;
  CHECK(a.bytes_in_use() == own);
  std::vector<void*> ps;
  for (int i = 0; i < 40; ++i) ps.push_back(a.allocate(3 * MiB, "block"));
  CHECK(a.bytes_in_use() == own + 120 * MiB);
  CHECK(a.reserved_bytes() <= 256 * MiB);
  CHECK(a.chunk_count() < 10);
  for (void* p : ps) a.deallocate(p);
  CHECK(a.bytes_in_use() == own);
}

TEST_CASE("gpu allocation beyond the device's memory says the device is out of memory", "[gpu][memory]") {
  CudaBackend& be = cuda_backend();
  try {
    be.allocator().allocate(size_t(64) << 40, "an impossible tensor");  // 64 TiB
    FAIL("expected OutOfMemoryError");
  } catch (const OutOfMemoryError& e) {
    CHECK_THAT(std::string(e.what()), Contains("an impossible tensor") &&
                                          Contains("device itself is out of memory") && Contains("cap none"));
  }
  Buffer b(be, 16);  // still usable
  b.upload(std::vector<float>{1, 2, 3, 4});
  CHECK(b.download(4) == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("gpu fit tracks the CPU fit; growth and tf32 runs train", "[gpu][fit]") {
  const char* yaml = R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 64}, {type: relu}, {type: dropout, rate: 0.2}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: sgd, lr: 0.1, momentum: 0.9}
data: {train: {format: disc, samples: 300}, num_classes: 2, batch_size: 32, validation_split: 0.2}
train: {epochs: 3, seed: 5}
)";
  auto run = [&](const std::string& device, bool growth, MathMode math) {
    Config cfg = parse_config(yaml, "fit.yaml", {});
    FitOptions fo;
    fo.device.device = device;
    fo.device.mem_growth = growth;
    fo.device.math = math;
    fo.device.mem_limit_bytes = device == "cpu" ? 0 : 512 * MiB;
    std::ostringstream out;
    return fit(cfg, fo, out);
  };
  const FitResult cpu = run("cpu", false, MathMode::strict_fp32);
  const FitResult gpu = run("gpu:0", false, MathMode::strict_fp32);
  INFO("final train loss cpu " << cpu.final_train_loss << " gpu " << gpu.final_train_loss);
  CHECK(gpu.epochs_run == 3);
  CHECK(std::abs(gpu.final_train_loss - cpu.final_train_loss) <= 1e-3 * cpu.final_train_loss);
  CHECK(std::abs(gpu.final_val_loss - cpu.final_val_loss) <= 1e-3 * cpu.final_val_loss);
  CHECK(gpu.peak_bytes <= 512 * MiB);
  const FitResult grown = run("gpu:0", true, MathMode::strict_fp32);
  CHECK(std::abs(grown.final_train_loss - gpu.final_train_loss) <= 1e-6 * gpu.final_train_loss);
  const FitResult tf32 = run("gpu:0", false, MathMode::tf32);
  INFO("tf32 final train loss " << tf32.final_train_loss);
  CHECK(std::isfinite(tf32.final_train_loss));
  CHECK(std::abs(tf32.final_train_loss - cpu.final_train_loss) <= 0.05 * cpu.final_train_loss);
}
