// math: bf16 and fp16 on the GPU (activations and their gradients stored in 16 bits, tensor-core
// arithmetic with f32 accumulation, f32 weights, optimizer state and statistics; fp16 with loss
// scaling):
//   - a residual batchnorm CNN with layers that keep f32 (global pooling, dropout, softmax) trains
//     four steps like strict fp32: parameter updates within rel 5e-2 of fp32's (fp16: 1.25e-2) and
//     not equal to them (16 bits ran), loss sums within rel 2e-2; the step is still one CUDA graph;
//   - the activation arena of the CNN is smaller than fp32's;
//   - the executor's dtype conversions at the edges carry gradients both ways: a bf16 layer
//     between two f32 ones, and a tensor consumed by a bf16 and an f32 layer (gradients summed);
//   - channels-last chains (convolution, batchnorm, activations, pooling, 1-D and 2-D,
//     asymmetric padding, residual adds and tensors with two consumers, mixed layouts at an add,
//     outputs to layers that need NCHW) train like plain NCHW bf16.
#include <iostream>

#include "lib/config/config.h"
#include "lib/model/executor.h"
#include "tests/gpu/fusion_run.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;

namespace {

const char* kResidual = R"(model:
  input_shape: [3, 12, 12]
  layers:
    - {type: conv2d, name: stem, filters: 8, kernel_size: 3, padding: same}
    - {type: batchnorm, name: bn0}
    - {type: relu, name: r0}
    - {type: conv2d, name: c1, filters: 8, kernel_size: 3, padding: same}
    - {type: batchnorm, name: bn1}
    - {type: add, name: add, inputs: [bn1, r0]}
    - {type: relu, name: r1}
    - {type: maxpool2d, name: pool}
    - {type: conv2d, name: c2, filters: 16, kernel_size: 2, padding: same}
    - {type: gelu, name: g2}
    - {type: dropout2d, name: drop, rate: 0.2}
    - {type: global_avg_pool, name: gap}
    - {type: dense, name: fc1, units: 12, activation: tanh}
    - {type: dense, name: fc2, units: 6}
    - {type: log_softmax, name: out}
loss: {type: nll}
data: {train: {format: random}, num_classes: 6}
)";

// A tensor (r0) that feeds both a bf16 layer (dense fc) and an f32 one (softmax -> its own
// branch), so its gradient is a sum over an edge conversion and a native bf16 write.
const char* kBranches = R"(model:
  input_shape: [10]
  layers:
    - {type: dense, name: d0, units: 12}
    - {type: relu, name: r0}
    - {type: dense, name: a, inputs: [r0], units: 6}
    - {type: softmax, name: s, inputs: [r0]}
    - {type: dense, name: b, inputs: [s], units: 6}
    - {type: add, name: out, inputs: [a, b]}
data: {train: {format: random}, num_classes: 6}
)";

// Channels-last chains with every kind of edge: a conv fed NCHW (the model's input), asymmetric
// "same" padding, batchnorm into add (which needs NCHW), relu into flatten, conv1d chains.
const char* kLayouts = R"(model:
  input_shape: [4, 10, 10]
  layers:
    - {type: conv2d, name: c0, filters: 8, kernel_size: 3, padding: same}
    - {type: batchnorm, name: bn0}
    - {type: relu, name: r0}
    - {type: conv2d, name: c1, filters: 8, kernel_size: 2, padding: same}
    - {type: batchnorm, name: bn1}
    - {type: add, name: add, inputs: [bn1, r0]}
    - {type: relu, name: r1}
    - {type: conv2d, name: c2, filters: 16, kernel_size: 3, strides: 2, padding: same}
    - {type: leaky_relu, name: r2}
    - {type: avgpool2d, name: pool, pool_size: 2, padding: same}
    - {type: maxpool2d, name: pool2, pool_size: 2}
    - {type: relu, name: r3}
    - {type: flatten, name: flat}
    - {type: dense, name: fc, units: 6}
data: {train: {format: random}, num_classes: 6}
)";

// Mixed layouts at add: r0 also goes to a view (flatten), so it stays NCHW while bn1 arrives
// channels-last (add takes both, writes channels-last, and sends r0's gradient back NCHW into a sum
// of three); add2 takes two channels-last inputs and writes NCHW for the flatten after it.
const char* kLayoutsMixed = R"(model:
  input_shape: [4, 8, 8]
  layers:
    - {type: conv2d, name: c0, filters: 8, kernel_size: 3, padding: same}
    - {type: batchnorm, name: bn0}
    - {type: relu, name: r0}
    - {type: conv2d, name: c1, filters: 8, kernel_size: 3, padding: same}
    - {type: batchnorm, name: bn1}
    - {type: add, name: add, inputs: [bn1, r0]}
    - {type: relu, name: r1}
    - {type: conv2d, name: c2, filters: 8, kernel_size: 3, padding: same}
    - {type: batchnorm, name: bn2}
    - {type: add, name: add2, inputs: [bn2, r1]}
    - {type: flatten, name: f1}
    - {type: dense, name: d1, units: 6}
    - {type: flatten, name: f0, inputs: [r0]}
    - {type: dense, name: d0, units: 6}
    - {type: add, name: out, inputs: [d1, d0]}
data: {train: {format: random}, num_classes: 6}
)";

const char* kLayouts1d = R"(model:
  input_shape: [3, 24]
  layers:
    - {type: conv1d, name: c0, filters: 8, kernel_size: 3, padding: same}
    - {type: batchnorm, name: bn0}
    - {type: relu, name: r0}
    - {type: maxpool1d, name: p0}
    - {type: conv1d, name: c1, filters: 8, kernel_size: 4, padding: same}
    - {type: tanh, name: t1}
    - {type: global_max_pool, name: gmp}
    - {type: dense, name: fc, units: 5}
data: {train: {format: random}, num_classes: 5}
)";

struct Run {
  std::vector<float> initial, params;
  MetricSums train;
  size_t activation_bytes = 0;
  int backend_layouts = 0;  // Executor::outputs_in_backend_layouts
};

// fp16 scales the loss (from 1024: these small nets' scaled gradients then stay far below fp16's
// 65504, so no step of the four is skipped and the comparison with fp32 is step for step).
Run train(const Model& model, MathMode math, const char* loss, int64_t classes, bool plain_layouts = false) {
  CudaBackend& be = cuda_backend();
  const Optimizer opt(make_optimizer("{type: sgd, lr: 0.05, momentum: 0.9}"));
  ExecutorOptions o;
  o.batch_sizes = {16};
  o.num_classes = classes;
  o.loss = loss_config(loss);
  o.math = math;
  o.seed = 5;
  o.plain_layouts = plain_layouts;
  o.deterministic = true;  // runs repeat
  o.loss_scaling = math == MathMode::fp16;
  o.loss_scale_init = 1024.f;
  Executor ex(model, be, opt, o);
  Run r;
  r.backend_layouts = ex.outputs_in_backend_layouts();
  for (const MemoryItem& m : ex.memory_plan())
    if (m.what.rfind("activations", 0) == 0) r.activation_bytes = m.bytes;
  r.initial.resize(size_t(model.param_arena_floats()));
  std::vector<float> buffers(size_t(std::max<int64_t>(model.buffer_arena_floats(), 1)));
  model.initialize(r.initial.data(), buffers.data(), 3);
  ex.upload_params(r.initial.data(), buffers.data());
  const int64_t in = model.input_shape().numel();
  for (int64_t t = 1; t <= 4; ++t) {
    const std::vector<float> x = random_vector(size_t(16 * in), 500 + uint64_t(t));
    std::vector<int32_t> y(16);
    for (size_t i = 0; i < y.size(); ++i) y[i] = int32_t((i * 7 + size_t(t)) % size_t(classes));
    ex.train_step(16, x.data(), y.data(), t, 0.05f);
  }
  r.train = ex.read_metrics();
  if (ex.loss_scaling()) REQUIRE(ex.read_loss_scale().overflow_steps == 0);
  r.params.resize(r.initial.size());
  ex.download_params(r.params.data(), nullptr);
  return r;
}

// The parameter updates of the model's tensors (padding excluded).
std::vector<float> updates(const Model& model, const Run& r) {
  std::vector<float> d;
  for (const TensorSlot& s : model.params())
    for (int64_t i = 0; i < s.shape.numel(); ++i)
      d.push_back(r.params[size_t(s.offset + i)] - r.initial[size_t(s.offset + i)]);
  return d;
}

// smaller_arena: the bf16 activations take less memory than fp32's (not for a tiny model, whose
// arena is mostly the f32 copies at the dtype edges).
// fp16 has 3 more mantissa bits than bf16: its bound is 4x tighter.
void expect_close_to_fp32(const char* yaml, const char* loss, int64_t classes, bool smaller_arena,
                          MathMode low = MathMode::bf16) {
  const char* name = math_name(low);
  if (!gpu_has_math(low)) return;
  Config c = parse_config(yaml, "low.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  const size_t graphs = cuda_backend().graph_count();
  const Run f32 = train(model, MathMode::strict_fp32, loss, classes);
  const Run b16 = train(model, low, loss, classes);
  CHECK(cuda_backend().graph_count() >= graphs + 2);  // both runs captured their step
  const double e = rel_error(updates(model, b16), updates(model, f32));
  INFO("parameter updates: " << name << " against fp32 rel " << e << "; loss sums " << b16.train.loss_sum
                             << " / " << f32.train.loss_sum << "; activation arena " << b16.activation_bytes
                             << " / " << f32.activation_bytes);
  std::cout << name << " " << c.file << ": parameter updates rel " << e << " to fp32, loss sum "
            << b16.train.loss_sum << " vs " << f32.train.loss_sum << ", activations " << b16.activation_bytes
            << " vs " << f32.activation_bytes << " bytes\n";
  CHECK(e < (low == MathMode::fp16 ? 1.25e-2 : 5e-2));
  CHECK(e > 1e-6);
  CHECK(std::abs(b16.train.loss_sum - f32.train.loss_sum) <= 2e-2 * std::abs(f32.train.loss_sum));
  if (smaller_arena) CHECK(b16.activation_bytes < f32.activation_bytes);
}

}  // namespace

TEST_CASE("gpu bf16 trains a residual batchnorm CNN like fp32", "[gpu][bf16]") {
  expect_close_to_fp32(kResidual, "nll", 6, true);
}

TEST_CASE("gpu bf16 conversions carry gradients across dtype edges and shared tensors", "[gpu][bf16]") {
  expect_close_to_fp32(kBranches, "cross_entropy", 6, false);
}

TEST_CASE("gpu fp16 with loss scaling trains a residual batchnorm CNN like fp32", "[gpu][fp16]") {
  expect_close_to_fp32(kResidual, "nll", 6, true, MathMode::fp16);
}

TEST_CASE("gpu fp16 conversions carry gradients across dtype edges and shared tensors", "[gpu][fp16]") {
  expect_close_to_fp32(kBranches, "cross_entropy", 6, false, MathMode::fp16);
}

TEST_CASE("gpu bf16 channels-last chains train like plain NCHW bf16", "[gpu][bf16]") {
  if (!gpu_has_math(MathMode::bf16)) return;
  // The layers that write channels-last (kDenseLayout: through adds and into tensors that feed two
  // layers); kLayouts: c0 bn0 c1 bn1 add c2 r2 pool (pool2's fused relu feeds the flatten; r1 runs
  // inside the add); kLayoutsMixed: c0 c1 bn1 add c2 bn2; kLayouts1d: c0 bn0 p0 c1 (t1 feeds
  // global_max_pool, which is f32).
  struct Case {
    const char* yaml;
    int64_t classes;
    int channels_last;
  };
  for (const Case& k : {Case{kLayouts, 6, 8}, Case{kLayoutsMixed, 6, 6}, Case{kLayouts1d, 5, 4}}) {
    const char* yaml = k.yaml;
    const int64_t classes = k.classes;
    Config c = parse_config(yaml, "layouts.yaml", {});
    Model model(c.input_shape, c.layers, c.init, c.file);
    const Run nchw = train(model, MathMode::bf16, "cross_entropy", classes, true);
    const Run nhwc = train(model, MathMode::bf16, "cross_entropy", classes, false);
    const Run f32 = train(model, MathMode::strict_fp32, "cross_entropy", classes);
    const double e = rel_error(updates(model, nhwc), updates(model, nchw));
    const double e32 = rel_error(updates(model, nhwc), updates(model, f32));
    INFO(c.input_shape.str() << ": channels-last against NCHW bf16 rel " << e << ", against fp32 " << e32
                             << "; loss sums " << nhwc.train.loss_sum << " / " << nchw.train.loss_sum);
    std::cout << "bf16 layouts " << c.input_shape.str() << ": channels-last against NCHW rel " << e
              << ", against fp32 " << e32 << "\n";
    CHECK(nchw.backend_layouts == 0);
    CHECK(nhwc.backend_layouts == k.channels_last);
    CHECK(e < 3e-2);
    CHECK(e32 < 1e-1);
    CHECK(std::abs(nhwc.train.loss_sum - nchw.train.loss_sum) <= 1e-2 * std::abs(nchw.train.loss_sum));
  }
}

TEST_CASE("gpu bf16 keeps convolutions whose filters are not a multiple of 8 in f32", "[gpu][bf16]") {
  if (!gpu_has_math(MathMode::bf16)) return;
  // Registry: kLowPrecisionChannelsOf8. 10 filters: the whole net stays f32 (the activation and
  // pooling after it follow), so its arena is fp32's; 16 filters: bf16.
  const char* yaml = R"(model:
  input_shape: [3, 8, 8]
  layers:
    - {type: conv2d, filters: FILTERS, kernel_size: 3, padding: same}
    - {type: relu}
    - {type: global_avg_pool}
data: {train: {format: random}, num_classes: FILTERS}
)";
  for (int filters : {10, 16}) {
    std::string y = yaml;
    for (size_t at; (at = y.find("FILTERS")) != std::string::npos;) y.replace(at, 7, std::to_string(filters));
    Config c = parse_config(y, "filters.yaml", {});
    Model model(c.input_shape, c.layers, c.init, c.file);
    const Run f32 = train(model, MathMode::strict_fp32, "cross_entropy", filters);
    const Run b16 = train(model, MathMode::bf16, "cross_entropy", filters);
    INFO(filters << " filters: activation arena " << b16.activation_bytes << " (bf16) vs "
                 << f32.activation_bytes);
    if (filters == 10)
      CHECK(b16.activation_bytes == f32.activation_bytes);
    else  // 16-bit tensors and the edges around them: a different plan
      CHECK(b16.activation_bytes != f32.activation_bytes);
  }
}

namespace {

// Four bf16 steps, evaluation and prediction with the executor's 16-bit copy of the parameters
// and without it (each layer converting its own): the same bits (deterministic kernels, so that
// both runs choose the same algorithms).
void check_low_params_alike(const Model& model) {
  const FusionRun a = run_fusion(cuda_backend(), model, MathMode::bf16, false, nullptr, true, true, true);
  const FusionRun b = run_fusion(cuda_backend(), model, MathMode::bf16, false, nullptr, true, true, false);
  CHECK(a.low_params);
  CHECK_FALSE(b.low_params);
  CHECK(a.train.loss_sum == b.train.loss_sum);
  CHECK(a.eval.loss_sum == b.eval.loss_sum);
  CHECK(a.params == b.params);
  CHECK(a.out == b.out);
}

}  // namespace

// The executor's 16-bit copy of the parameters (ExecutorOptions::low_precision_params), refreshed
// after each update, which dense and attention read instead of converting their weights: four
// bf16 steps of a small transformer train, evaluate and predict bit for bit as with each layer
// converting its own (deterministic kernels, so that both runs choose the same algorithms).
TEST_CASE("gpu dense and attention read the executor's 16-bit parameters and train bit for bit alike",
          "[gpu][bf16][low_params]") {
  if (!gpu_has_math(MathMode::bf16)) return;
  const Config c = parse_config(R"(model:
  input_shape: [16, 64]
  layers:
    - {type: dense, name: d0, units: 64, per_position: true}
    - {type: multi_head_attention, name: attn, heads: 2, causal: true}
    - {type: add, name: res, inputs: [attn, d0]}
    - {type: dense, name: d1, units: 128, per_position: true}
    - {type: gelu, name: g, approximate: tanh}
    - {type: flatten, name: flat}
    - {type: dense, name: fc, units: 6}
data: {train: {format: random}, num_classes: 6}
)",
                                "low.yaml", {});
  check_low_params_alike(Model(c.input_shape, c.layers, c.init, c.file));
}

// The same for convolutions, whose 16-bit filters the optimizer's step writes (K, R, S, C)
// (LayerKernel::low_param_krsc): a stride, a 1x1 and batchnorm between them; 8 input channels,
// so that no convolution pads its channels (those convert their own filters). Six classes, as
// run_fusion's labels.
TEST_CASE("gpu convolutions read the optimizer's (K, R, S, C) 16-bit filters and train bit for bit alike",
          "[gpu][bf16][low_params]") {
  if (!gpu_has_math(MathMode::bf16)) return;
  const Config c = parse_config(R"(model:
  input_shape: [8, 12, 12]
  layers:
    - {type: conv2d, name: c0, filters: 16, kernel_size: 3, padding: same}
    - {type: batchnorm, name: bn0}
    - {type: relu, name: r0}
    - {type: conv2d, name: c1, filters: 32, kernel_size: 3, strides: 2, padding: same}
    - {type: relu, name: r1}
    - {type: conv2d, name: c2, filters: 16, kernel_size: 1}
    - {type: global_avg_pool, name: gap}
    - {type: dense, name: fc, units: 6}
data: {train: {format: random}, num_classes: 6}
)",
                                "low_conv.yaml", {});
  check_low_params_alike(Model(c.input_shape, c.layers, c.init, c.file));
}
