#include "lib/train/bench_matmul.h"

#include <spdlog/spdlog.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>
#include <vector>

#include "lib/core/counter_rng.h"
#include "lib/core/elapsed.h"
#include "lib/core/error.h"
#include "lib/memory/allocator.h"
#include "lib/model/model.h"
#include "lib/registry/registry.h"

namespace trainer {
namespace {

using Clock = std::chrono::steady_clock;

// Backend memory, given back however the benchmark ends.
struct DeviceBuffer {
  Allocator& a;
  void* p;
  DeviceBuffer(Allocator& alloc, size_t bytes, const std::string& what)
      : a(alloc), p(alloc.allocate(bytes, what)) {}
  ~DeviceBuffer() { a.deallocate(p); }
  float* f() const { return static_cast<float*>(p); }
};

}  // namespace

std::string MatmulShape::str() const {
  return "(" + std::to_string(m) + " x " + std::to_string(k) + ") x (" + std::to_string(k) + " x " +
         std::to_string(n) + ")";
}

MatmulShape parse_matmul_shape(const std::string& text) {
  MatmulShape s;
  long long m = 0, k = 0, n = 0;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%lldx%lldx%lld%c", &m, &k, &n, &tail) != 3 || m < 1 || k < 1 || n < 1 ||
      m > kMaxTensorElements || k > kMaxTensorElements || n > kMaxTensorElements)
    throw UsageError("--size " + text + ": expected MxKxN, three positive integers, e.g. 10000x100x100000");
  s.m = m, s.k = k, s.n = n;
  for (int64_t elements : {s.m * s.k, s.k * s.n, s.m * s.n})
    if (elements > kMaxTensorElements)
      throw UsageError("--size " + text + ": a matrix of " + with_thousands(elements) +
                       " elements exceeds one tensor (2^31 - 1 elements)");
  return s;
}

MatmulTiming time_matmul(const MatmulShape& shape, const DeviceRequest& device, int repeats) {
  std::string note;
  std::unique_ptr<Backend> be = BackendRegistry::global().create(device, &note);
  if (!note.empty()) spdlog::warn("{}", note);
  // The dense layer that computes it: input (K), weight (N, K), no bias.
  YAML::Node layers = YAML::Load("[{type: dense, use_bias: false}]");
  layers[0]["units"] = shape.n;
  const Model model(Shape{shape.k}, layers, InitScheme::torch, "bench matmul");
  model.check_batch_size(shape.m);
  Allocator& alloc = be->allocator();
  DeviceBuffer scalars(alloc, sizeof(StepScalars), "matmul step scalars");
  const StepScalars zero{};
  be->copy_to_device(scalars.p, &zero, sizeof zero);
  KernelContext ctx;
  ctx.backend = be.get();
  ctx.batch = shape.m;
  ctx.scalars = static_cast<const StepScalars*>(scalars.p);
  ctx.math = device.math;
  ctx.deterministic = device.deterministic;
  std::unique_ptr<LayerKernel> kernel = Registry::global().make_kernel(be->name(), *model.layers()[0], ctx);

  // A: (M, K), B^T: (N, K), C: (M, N); uniform in [-1, 1) from a fixed seed.
  const size_t a_n = size_t(shape.m * shape.k), b_n = size_t(shape.n * shape.k);
  DeviceBuffer a(alloc, a_n * sizeof(float), "matmul A (M x K)");
  DeviceBuffer b(alloc, b_n * sizeof(float), "matmul B (K x N)");
  DeviceBuffer c(alloc, size_t(shape.m) * size_t(shape.n) * sizeof(float), "matmul C (M x N)");
  const size_t ws_bytes = kernel->workspace_bytes();
  std::unique_ptr<DeviceBuffer> ws =
      ws_bytes ? std::make_unique<DeviceBuffer>(alloc, ws_bytes, "matmul workspace") : nullptr;
  std::vector<float> host_a(a_n), host_b(b_n);
  SplitMix64 rng = SplitMix64::counter(0x3A7u);
  for (float& v : host_a) v = float(2 * rng.uniform() - 1);
  for (float& v : host_b) v = float(2 * rng.uniform() - 1);
  be->copy_to_device(a.p, host_a.data(), a_n * sizeof(float));
  be->copy_to_device(b.p, host_b.data(), b_n * sizeof(float));
  auto plain = [](void* data, Shape s) {  // f32, row-major
    TensorView v;
    v.data = data;
    v.shape = std::move(s);
    return v;
  };
  KernelBinding binding;  // forward only: no gradients
  binding.params = {plain(b.p, Shape{shape.n, shape.k})};
  binding.grads = {plain(nullptr, Shape{shape.n, shape.k})};
  binding.inputs = {plain(a.p, Shape{shape.m, shape.k})};
  binding.input_grads = {plain(nullptr, Shape{shape.m, shape.k})};
  binding.output = plain(c.p, Shape{shape.m, shape.n});
  binding.output_grad = plain(nullptr, Shape{shape.m, shape.n});
  binding.workspace = ws ? ws->p : nullptr;
  binding.workspace_bytes = ws_bytes;
  kernel->bind(binding);

  kernel->forward(false);
  be->synchronize();
  std::vector<double> seconds;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    kernel->forward(false);
    be->synchronize();
    seconds.push_back(seconds_since(t0));
  }
  std::sort(seconds.begin(), seconds.end());

  MatmulTiming t;
  t.device = device.device;
  t.description = be->description();
  t.seconds = seconds[seconds.size() / 2];
  t.gflops = shape.flops() / t.seconds / 1e9;
  for (int i = 0; i < 16; ++i) {  // entries spread over C, corners included
    const int64_t row = (shape.m - 1) * i / 15, col = (shape.n - 1) * ((i * 7) % 16) / 15;
    float got = 0;
    be->copy_to_host(&got, c.f() + row * shape.n + col, sizeof got);
    double ref = 0, scale = 0;
    for (int64_t j = 0; j < shape.k; ++j) {
      const double p = double(host_a[size_t(row * shape.k + j)]) * double(host_b[size_t(col * shape.k + j)]);
      ref += p;
      scale += std::fabs(p);
    }
    t.max_rel_error = std::max(t.max_rel_error, std::fabs(double(got) - ref) / std::max(scale, 1e-30));
  }
  return t;
}

}  // namespace trainer
