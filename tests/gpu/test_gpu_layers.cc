// Every CUDA layer kernel against the CPU (oneDNN) kernel on the same random data, strict fp32:
// forward y, backward dx and parameter gradients.
// Bounds, as rel = ||gpu - cpu|| / ||cpu|| per tensor:
//   element-wise activations, softmax, pooling: 1e-5    conv2d, dense: 1e-4
//   dropout: bit-identical (same counter-based mask, one multiply per element)
// Parameters are laid out as Model does (64-float slots); the shapes chosen here have weight
// tensors of a multiple of 64 floats, so the comparison does not depend on where a backend puts
// the bias (test_gpu_executor.cc checks the CUDA kernels against Model's offsets).
// Gradient buffers start filled with 1e3: backward must overwrite them, never accumulate.
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;

namespace {

struct LayerRun {
  std::vector<float> y, dx, grads;
};

LayerRun run_layer(Backend& be, const Layer& l, int64_t batch, const std::vector<float>& x,
                   const std::vector<float>& params, const std::vector<float>& dy, bool training,
                   bool with_dx = true) {
  StepScalars sc;
  sc.seed = 1234;
  sc.step = 5;
  Buffer scalars(be, sizeof(StepScalars));
  be.copy_to_device(scalars.get(), &sc, sizeof sc);
  KernelContext ctx;
  ctx.backend = &be;
  ctx.batch = batch;
  ctx.scalars = scalars.as<StepScalars>();
  ctx.layer_index = 3;
  ctx.math = MathMode::strict_fp32;
  ctx.deterministic = true;
  auto kernel = Registry::global().make_kernel(be.name(), l, ctx);
  const size_t n_in = size_t(batch * l.input_shape().numel());
  const size_t n_out = size_t(batch * l.output_shape().numel());
  Buffer xb(be, n_in * 4), dxb(be, n_in * 4), yb(be, n_out * 4), dyb(be, n_out * 4);
  Buffer pb(be, params.size() * 4), gb(be, params.size() * 4), ws(be, kernel->workspace_bytes());
  xb.upload(x);
  dyb.upload(dy);
  if (!params.empty()) {
    pb.upload(params);
    gb.fill(1e3f, params.size());
  }
  dxb.fill(1e3f, n_in);
  kernel->bind(params.empty() ? nullptr : pb.as(), params.empty() ? nullptr : gb.as(), nullptr,
               ws.get());
  kernel->forward(xb.as(), yb.as(), training);
  kernel->backward(xb.as(), yb.as(), dyb.as(), with_dx ? dxb.as() : nullptr);
  LayerRun r;
  r.y = yb.download(n_out);
  if (with_dx) r.dx = dxb.download(n_in);
  r.grads = unpadded(l, gb.download(params.size()));
  return r;
}

// Runs one layer on both backends and checks y, dx and parameter gradients within `bound`.
void compare_layer(const std::string& yaml, const Shape& in, int64_t batch, double bound,
                   uint64_t seed = 1) {
  INFO("layer " << yaml << " on input " << in.batched_str() << ", batch " << batch);
  auto l = make_layer(yaml, in);
  const size_t n_in = size_t(batch * in.numel()), n_out = size_t(batch * l->output_shape().numel());
  const std::vector<float> x = random_vector(n_in, seed, -2.f, 2.f);
  const std::vector<float> dy = random_vector(n_out, seed + 1);
  std::vector<float> params = random_vector(size_t(param_slice_floats(*l)), seed + 2, -0.5f, 0.5f);
  const LayerRun cpu = run_layer(cpu_backend(), *l, batch, x, params, dy, true);
  const LayerRun gpu = run_layer(cuda_backend(), *l, batch, x, params, dy, true);
  const double ey = rel_error(gpu.y, cpu.y), edx = rel_error(gpu.dx, cpu.dx);
  INFO("rel error y " << ey << ", dx " << edx);
  CHECK(ey < bound);
  CHECK(edx < bound);
  if (!params.empty()) {
    const double eg = rel_error(gpu.grads, cpu.grads);
    INFO("rel error param grads " << eg);
    CHECK(eg < bound);
    // dx = null (first layer): the same parameter gradients.
    const LayerRun no_dx = run_layer(cuda_backend(), *l, batch, x, params, dy, true, false);
    CHECK(no_dx.grads == gpu.grads);
  }
}

}  // namespace

TEST_CASE("gpu conv2d matches the CPU (valid, same, asymmetric same, strided, explicit)", "[gpu][layers]") {
  const double bound = 1e-4;
  compare_layer("{type: conv2d, filters: 16, kernel_size: 3, padding: same}", Shape{4, 9, 9}, 3, bound);
  compare_layer("{type: conv2d, filters: 16, kernel_size: 3}", Shape{4, 9, 9}, 2, bound);
  // Even kernel with "same": pads (1, 2), which cuDNN cannot describe.
  compare_layer("{type: conv2d, filters: 8, kernel_size: 4, padding: same}", Shape{2, 10, 10}, 3, bound);
  // Stride 2 with "same" on an even size: pads (0, 1).
  compare_layer("{type: conv2d, filters: 16, kernel_size: 3, strides: 2, padding: same}", Shape{4, 10, 10}, 2, bound);
  compare_layer("{type: conv2d, filters: 8, kernel_size: 2, strides: [2, 1], use_bias: false}", Shape{4, 7, 6}, 2, bound);
  compare_layer("{type: conv2d, filters: 16, kernel_size: 2, padding: 1}", Shape{1, 6, 5}, 4, bound);
}

TEST_CASE("gpu dense matches the CPU", "[gpu][layers]") {
  compare_layer("{type: dense, units: 16}", Shape{32}, 5, 1e-4);
  compare_layer("{type: dense, units: 10, use_bias: false}", Shape{64}, 7, 1e-4);
  compare_layer("{type: dense, units: 64}", Shape{3}, 1, 1e-4);
}

TEST_CASE("gpu pooling matches the CPU (max and avg, symmetric and asymmetric padding)", "[gpu][layers]") {
  const double bound = 1e-5;
  for (const char* type : {"maxpool2d", "avgpool2d"}) {
    const std::string t = type;
    compare_layer("{type: " + t + "}", Shape{3, 8, 8}, 2, bound);
    compare_layer("{type: " + t + ", pool_size: 3, strides: 2, padding: same}", Shape{3, 8, 8}, 2, bound);
    compare_layer("{type: " + t + ", pool_size: 3, strides: 1, padding: same}", Shape{2, 7, 7}, 3, bound);
    compare_layer("{type: " + t + ", pool_size: 3, strides: 2, padding: 1}", Shape{2, 9, 6}, 2, bound);
    compare_layer("{type: " + t + ", pool_size: [2, 3], strides: [1, 2]}", Shape{2, 5, 7}, 2, bound);
  }
}

TEST_CASE("gpu element-wise activations match the CPU", "[gpu][layers]") {
  for (const char* yaml : {"{type: relu}", "{type: leaky_relu, alpha: 0.2}", "{type: sigmoid}",
                           "{type: tanh}", "{type: gelu}"})
    compare_layer(yaml, Shape{3, 4, 5}, 4, 1e-5);
}

TEST_CASE("gpu softmax and log_softmax match the CPU", "[gpu][layers]") {
  compare_layer("{type: softmax}", Shape{10}, 8, 1e-5);
  compare_layer("{type: log_softmax}", Shape{10}, 8, 1e-5);
  compare_layer("{type: log_softmax}", Shape{1000}, 3, 1e-5);
}

TEST_CASE("gpu dropout masks are bit-identical to the CPU's", "[gpu][layers]") {
  for (const char* yaml : {"{type: dropout, rate: 0.3}", "{type: dropout2d, rate: 0.5}"}) {
    INFO(yaml);
    auto l = make_layer(yaml, Shape{6, 5, 4});
    const int64_t batch = 4;
    const size_t n = size_t(batch * l->input_shape().numel());
    const std::vector<float> x = random_vector(n, 11), dy(n, 1.f);
    const LayerRun cpu = run_layer(cpu_backend(), *l, batch, x, {}, dy, true);
    const LayerRun gpu = run_layer(cuda_backend(), *l, batch, x, {}, dy, true);
    CHECK(std::memcmp(gpu.y.data(), cpu.y.data(), n * 4) == 0);
    CHECK(std::memcmp(gpu.dx.data(), cpu.dx.data(), n * 4) == 0);  // dy = 1: dx is the mask
    size_t dropped = 0;
    for (float m : gpu.dx) dropped += m == 0.f;
    CHECK(dropped > 0);
    CHECK(dropped < n);
    // Eval: identity.
    const LayerRun eval = run_layer(cuda_backend(), *l, batch, x, {}, dy, false);
    CHECK(eval.y == x);
    CHECK(eval.dx == dy);
  }
}

TEST_CASE("gpu dropout2d drops whole channels", "[gpu][layers]") {
  auto l = make_layer("{type: dropout2d, rate: 0.5}", Shape{8, 3, 3});
  const int64_t batch = 4;
  const size_t n = size_t(batch * 8 * 9);
  const LayerRun gpu = run_layer(cuda_backend(), *l, batch, std::vector<float>(n, 1.f), {},
                                 std::vector<float>(n, 1.f), true);
  for (size_t plane = 0; plane < size_t(batch * 8); ++plane)
    for (size_t i = 1; i < 9; ++i) CHECK(gpu.y[plane * 9 + i] == gpu.y[plane * 9]);
}
