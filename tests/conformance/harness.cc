#include "tests/conformance/harness.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>

#include "kernels/cpu/cpu_backend.h"
#include "lib/core/bf16.h"
#include "lib/core/fp16.h"
#include "lib/core/rng.h"
#include "lib/keys/node_reader.h"
#include "lib/model/arena_layout.h"
#include "lib/registry/registry.h"
#include "tests/warning_sink.h"

namespace trainer::conformance {
namespace {

std::unique_ptr<Layer> build_layer(const std::string& yaml, const std::vector<Shape>& inputs) {
  YAML::Node node = YAML::Load(yaml);
  NodeReader r(node, "layer", "conformance");
  const std::string type = r.string("type", "");
  auto layer = Registry::global().layer(type, "conformance").make_layer(r);
  r.finish();  // a misspelt key in the table fails here
  layer->set_identity(type, type + "_test");
  layer->build(inputs, 0);
  return layer;
}

std::vector<float> uniform(size_t n, uint64_t seed, double lo, double hi) {
  SplitMix64 rng = SplitMix64::counter(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = float(lo + (hi - lo) * rng.uniform());
  return v;
}

std::vector<float> draw_inputs(const Inputs& in, size_t n, uint64_t seed) {
  SplitMix64 rng = SplitMix64::counter(seed);
  std::vector<float> x(n);
  switch (in.kind) {
    case Inputs::Kind::grid: {
      std::vector<size_t> perm(n);
      for (size_t i = 0; i < n; ++i) perm[i] = i;
      for (size_t i = n; i > 1; --i) std::swap(perm[i - 1], perm[rng.next_u64() % i]);
      for (size_t i = 0; i < n; ++i) x[i] = -1.f + 2.f * (float(perm[i]) + 0.5f) / float(n);
      break;
    }
    case Inputs::Kind::uniform:
      x = uniform(n, seed, in.lo, in.hi);
      break;
    case Inputs::Kind::integers:
      x = uniform(n, seed, in.lo, in.hi);
      for (auto& v : x) v = std::floor(v);
      break;
    case Inputs::Kind::tokens:
      for (auto& v : x) v = rng.uniform() < in.lo ? 0.f : float(int64_t(rng.next_u64() % uint64_t(in.vocab)));
      break;
  }
  return x;
}

// Element-wise |got - want| <= abs + rel |want|; reports the count and the worst element.
void expect_close(const char* what, const std::vector<float>& got, const std::vector<double>& want,
                  double abs, double rel) {
  REQUIRE(got.size() == want.size());
  size_t bad = 0, worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(double(got[i]) - want[i]), bound = abs + rel * std::abs(want[i]);
    if (!(err <= bound)) ++bad;
    if (!(err - bound <= worst_excess)) worst_excess = err - bound, worst = i;
  }
  INFO(what << ": " << bad << " of " << got.size() << " elements outside " << abs << " + " << rel
            << " |reference|; worst element " << worst << ": got " << (got.empty() ? 0.f : got[worst])
            << ", reference " << (want.empty() ? 0.0 : want[worst]));
  CHECK(bad == 0);
}

// Bounds of the buffers (running statistics) against the reference: max(1e-6, 1e-5 |ref|).
void expect_buffers_close(const std::vector<float>& got, const std::vector<double>& want) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(double(got[i]) - want[i]) <= std::max(1e-6, 1e-5 * std::abs(want[i])))) {
      if (!bad) first = i;
      ++bad;
    }
  INFO("buffers (running statistics): " << bad << " of " << got.size()
                                        << " outside max(1e-6, 1e-5 |reference|); "
                                        << "first element " << first << ": got " << (bad ? got[first] : 0.f)
                                        << ", reference " << (bad ? want[first] : 0.0));
  CHECK(bad == 0);
}

// The parameter tensors without slot padding, and the buffers, one vector per spec.
ReferenceInput reference_input(const CaseData& d) {
  ReferenceInput ri;
  ri.layer = d.layer.get();
  ri.batch = d.batch;
  ri.training = d.training;
  ri.forwards = d.forwards;
  ri.x.assign(d.x.begin(), d.x.end());
  const auto specs = d.layer->param_specs();
  for (size_t k = 0; k < specs.size(); ++k) {
    const auto begin = d.params.begin() + long(d.param_offsets[k]);
    ri.params.emplace_back(begin, begin + specs[k].shape.numel());
  }
  int64_t at = 0;
  for (const BufferSpec& b : d.layer->buffer_specs()) {
    ri.buffers.emplace_back(d.buffers.begin() + at, d.buffers.begin() + at + b.shape.numel());
    at += b.shape.numel();
  }
  ri.seed = d.scalars.seed;
  ri.step = d.scalars.step;
  ri.layer_index = d.layer_index;
  return ri;
}

void check_reference(const Row& row, const CaseData& d, const RunOutput& out) {
  ReferenceInput ri = reference_input(d);
  std::vector<double> y = row.reference(ri);
  if (d.fused_relu)
    for (double& v : y) v = v > 0 ? v : 0;
  expect_close("forward y against the float64 reference", out.y, y, 1e-4, 1e-4);
  std::vector<double> buffers;
  for (const auto& b : ri.buffers) buffers.insert(buffers.end(), b.begin(), b.end());
  expect_buffers_close(out.buffers, buffers);
}

// Central differences of L = sum(y * dy) at each element of `v` (inputs or parameters) in `at`.
void check_finite_differences(KernelRun& k, const char* what, const std::vector<float>& v,
                              const std::vector<float>& analytic, const std::vector<size_t>& at, float h,
                              void (KernelRun::*set)(size_t, float)) {
  size_t bad = 0;
  std::ostringstream first;
  for (size_t i : at) {
    (k.*set)(i, v[i] + h);
    const double up = k.objective();
    (k.*set)(i, v[i] - h);
    const double down = k.objective();
    (k.*set)(i, v[i]);
    const double numeric = (up - down) / (2.0 * double(h));
    if (!(std::abs(analytic[i] - numeric) <= 2e-3 + 2e-2 * std::abs(numeric))) {
      if (bad++ < 3)
        first << " " << what << "[" << i << "] analytic " << analytic[i] << " numeric " << numeric << ";";
    }
  }
  INFO("backward " << what << " against central differences (h " << h << "): " << bad << " of " << at.size()
                   << " elements outside 2e-3 + 2e-2 |numeric|:" << first.str());
  CHECK(bad == 0);
}

void check_cross(const char* what, const std::vector<float>& a, const std::vector<float>& cpu, double bound,
                 const std::vector<size_t>& at = {}) {
  if (bound == 0) {
    INFO(what << ": not bit-identical to the CPU's (rel error " << rel_error(a, cpu, at) << ")");
    CHECK(same_bits(a, cpu));
    return;
  }
  const double e = rel_error(a, cpu, at);
  INFO(what << ": rel error against the CPU " << e << ", bound " << bound);
  CHECK(e < bound);
}

std::string describe(const Row& row, const Case& c, const std::string& backend) {
  std::ostringstream s;
  s << row.type << " " << dtype_name(row.dtype) << " on " << backend << ": " << c.yaml << " on input "
    << c.input.batched_str();
  for (const Shape& more : c.more_inputs) s << " and " << more.batched_str();
  s << ", batch " << c.batch << ", seed " << c.seed << (c.training ? ", training" : ", eval");
  if (!c.note.empty()) s << " (" << c.note << ")";
  return s.str();
}

}  // namespace

Backend& cpu_backend() {
  static CpuBackend* b = new CpuBackend();
  return *b;
}

double rel_error(const std::vector<float>& a, const std::vector<float>& ref, const std::vector<size_t>& at) {
  REQUIRE(a.size() == ref.size());
  double diff = 0, norm = 0;
  auto add = [&](size_t i) {
    diff += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    norm += double(ref[i]) * ref[i];
  };
  if (at.empty())
    for (size_t i = 0; i < a.size(); ++i) add(i);
  else
    for (size_t i : at) add(i);
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  // memcmp must not see the null data() of an empty vector (UBSan), even for 0 bytes.
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

CaseData make_case_data(const Case& c) {
  CaseData d;
  std::vector<Shape> inputs{c.input};
  inputs.insert(inputs.end(), c.more_inputs.begin(), c.more_inputs.end());
  d.layer = build_layer(c.yaml, inputs);
  d.batch = c.batch;
  d.training = c.training;
  d.forwards = c.forwards;
  d.fused_relu = c.fused_relu;
  int64_t x_floats = 0;
  for (const Shape& s : inputs) x_floats += c.batch * s.numel();
  if (c.constant_inputs.empty()) {
    d.x = draw_inputs(c.inputs, size_t(x_floats), c.seed);
  } else {
    REQUIRE(c.constant_inputs.size() == c.more_inputs.size());
    d.x = draw_inputs(c.inputs, size_t(c.batch * c.input.numel()), c.seed);
    for (size_t k = 0; k < c.more_inputs.size(); ++k) {
      const std::vector<float> more =
          draw_inputs(c.constant_inputs[k], size_t(c.batch * c.more_inputs[k].numel()), c.seed + 10 + k);
      d.x.insert(d.x.end(), more.begin(), more.end());
    }
  }
  for (const auto& [i, v] : c.set_inputs) d.x.at(i) = v;
  d.dy = uniform(size_t(c.batch * d.layer->output_shape().numel()), c.seed + 2, -1, 1);
  SplitMix64 rng = SplitMix64::counter(c.seed + 1);
  ArenaLayout arena(size_t(kMaxArenaElements) * sizeof(float));
  for (const ParamSpec& p : d.layer->param_specs()) {
    size_t at = 0;
    const size_t n = size_t(p.shape.numel());
    REQUIRE(arena.place(n * sizeof(float), &at));
    at /= sizeof(float);
    d.param_offsets.push_back(at);
    d.params.resize(arena.bytes() / sizeof(float), std::numeric_limits<float>::quiet_NaN());
    const double shift = p.role == ParamRole::gamma ? 1.0 : 0.0;
    for (size_t i = 0; i < n; ++i) {
      d.params[at + i] = float(shift - 0.5 + rng.uniform());
      d.live.push_back(at + i);
    }
  }
  SplitMix64 brng = SplitMix64::counter(c.seed + 3);
  for (const BufferSpec& b : d.layer->buffer_specs())
    for (int64_t i = 0; i < b.shape.numel(); ++i) d.buffers.push_back(float(b.init - 0.5 + brng.uniform()));
  d.scalars.seed = 1234;
  d.scalars.step = 5;
  return d;
}

// ---- KernelRun ----

// Backend memory freed with the object.
class DeviceBuffer {
 public:
  DeviceBuffer(Backend& be, size_t floats)
      : be_(be), p_(be.allocator().allocate(floats ? floats * 4 : 4, "conformance")) {}
  ~DeviceBuffer() { be_.allocator().deallocate(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  float* get() const { return static_cast<float*>(p_); }
  // The host floats stored as `t` (bf16, fp16: rounded to nearest even).
  void upload(const std::vector<float>& v, DType t = DType::f32) {
    if (v.empty()) return;
    if (t == DType::f32) {
      be_.copy_to_device(p_, v.data(), v.size() * 4);
      return;
    }
    std::vector<uint16_t> b(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      b[i] = t == DType::bf16 ? bf16_from_float(v[i]) : f16_from_float(v[i]);
    be_.copy_to_device(p_, b.data(), b.size() * 2);
  }
  std::vector<float> download(size_t n, DType t = DType::f32) const {
    std::vector<float> v(n);
    if (!n) return v;
    if (t == DType::f32) {
      be_.copy_to_host(v.data(), p_, n * 4);
      return v;
    }
    std::vector<uint16_t> b(n);
    be_.copy_to_host(b.data(), p_, n * 2);
    for (size_t i = 0; i < n; ++i) v[i] = t == DType::bf16 ? float_from_bf16(b[i]) : float_from_f16(b[i]);
    return v;
  }

 private:
  Backend& be_;
  void* p_;
};

struct KernelRun::Tensors {
  DeviceBuffer x, y, dy, dx, params, grads, buffers, scalars;
  std::unique_ptr<DeviceBuffer> workspace;
  std::unique_ptr<DeviceBuffer> kept;  // the kernel's kept workspace, when it has one
  Tensors(Backend& be, size_t n_in, size_t n_out, size_t n_params, size_t n_buffers)
      : x(be, n_in),
        y(be, n_out),
        dy(be, n_out),
        dx(be, n_in),
        params(be, n_params),
        grads(be, n_params),
        buffers(be, n_buffers),
        scalars(be, (sizeof(StepScalars) + 3) / 4) {}
};

KernelRun::KernelRun(Backend& backend, const CaseData& data, MathMode math) : be_(backend), d_(data) {
  const Layer& l = *d_.layer;
  t_ = std::make_unique<Tensors>(be_, d_.x.size(), d_.dy.size(), d_.params.size(), d_.buffers.size());
  be_.copy_to_device(t_->scalars.get(), &d_.scalars, sizeof(StepScalars));
  KernelContext ctx;
  ctx.backend = &be_;
  ctx.batch = d_.batch;
  ctx.scalars = reinterpret_cast<const StepScalars*>(t_->scalars.get());
  ctx.layer_index = d_.layer_index;
  ctx.math = math;
  if (Registry::global().takes_low_precision(l.type(), be_.name())) act_ = be_.activation_dtype(math);
  ctx.act_dtype = act_;
  ctx.deterministic = true;
  ctx.fused_relu = d_.fused_relu;
  kernel_ = Registry::global().make_kernel(be_.name(), l, ctx);
  t_->workspace = std::make_unique<DeviceBuffer>(be_, (kernel_->workspace_bytes() + 3) / 4);
  if (size_t kept = kernel_->kept_workspace_bytes())
    t_->kept = std::make_unique<DeviceBuffer>(be_, (kept + 3) / 4);
  kernel_->bind(binding(true));
}

// Views of the case's tensors, as the executor makes them from the model's slots.
KernelBinding KernelRun::binding(bool with_dx) const {
  const Layer& l = *d_.layer;
  auto view = [&](float* data, const Shape& shape, DType dtype = DType::f32) {
    TensorView v;
    v.data = data;
    v.shape = shape;
    v.dtype = dtype;
    return v;
  };
  auto batched = [&](const Shape& s) {
    std::vector<int64_t> dims{d_.batch};
    dims.insert(dims.end(), s.dims.begin(), s.dims.end());
    return Shape(std::move(dims));
  };
  KernelBinding b;
  const auto specs = l.param_specs();
  for (size_t k = 0; k < specs.size(); ++k) {
    b.params.push_back(view(t_->params.get() + d_.param_offsets[k], specs[k].shape));
    b.grads.push_back(view(t_->grads.get() + d_.param_offsets[k], specs[k].shape));
  }
  size_t at = 0;
  for (const BufferSpec& s : l.buffer_specs()) {
    b.buffers.push_back(view(t_->buffers.get() + at, s.shape));
    at += size_t(s.shape.numel());
  }
  char* x = reinterpret_cast<char*>(t_->x.get());
  char* dx = reinterpret_cast<char*>(t_->dx.get());
  size_t x_at = 0;  // every input's batch, one after another (bytes)
  for (const Shape& s : l.input_shapes()) {
    b.inputs.push_back(view(reinterpret_cast<float*>(x + x_at), batched(s), act_));
    b.input_grads.push_back(view(with_dx ? reinterpret_cast<float*>(dx + x_at) : nullptr, batched(s), act_));
    x_at += size_t(d_.batch * s.numel()) * dtype_bytes(act_);
  }
  b.output = view(t_->y.get(), batched(l.output_shape()), act_);
  b.output_grad = view(t_->dy.get(), batched(l.output_shape()), act_);
  b.workspace = t_->workspace->get();
  b.workspace_bytes = kernel_->workspace_bytes();
  if (t_->kept) b.kept_workspace = t_->kept->get();
  return b;
}

KernelRun::~KernelRun() {
  kernel_.reset();  // before the memory it was bound to
}

RunOutput KernelRun::run(bool with_dx) {
  t_->x.upload(d_.x, act_);
  t_->dy.upload(d_.dy, act_);
  t_->params.upload(d_.params);
  t_->grads.upload(std::vector<float>(d_.params.size(), kGradientSentinel));
  t_->buffers.upload(d_.buffers);
  t_->dx.upload(std::vector<float>(d_.x.size(), kGradientSentinel), act_);
  kernel_->bind(binding(with_dx));
  for (int i = 0; i < d_.forwards; ++i) kernel_->forward(d_.training);
  RunOutput out;
  out.y = t_->y.download(d_.dy.size(), act_);
  out.buffers = t_->buffers.download(d_.buffers.size());
  kernel_->backward();
  if (with_dx) out.dx = t_->dx.download(d_.x.size(), act_);
  out.grads = t_->grads.download(d_.params.size());
  return out;
}

double KernelRun::objective() {
  REQUIRE(act_ == DType::f32);  // finite differences run in f32
  kernel_->forward(d_.training);
  const std::vector<float> y = t_->y.download(d_.dy.size());
  double L = 0;
  for (size_t i = 0; i < y.size(); ++i) L += double(y[i]) * double(d_.dy[i]);
  return L;
}

void KernelRun::set_input(size_t i, float v) { be_.copy_to_device(t_->x.get() + i, &v, 4); }
void KernelRun::set_param(size_t i, float v) { be_.copy_to_device(t_->params.get() + i, &v, 4); }

// ---- The checks ----

void run_low_precision_case(const Row& row, const Case& c, Backend& backend) {
  INFO(describe(row, c, backend.name()));
  const bool f16 = row.dtype == DType::f16;
  const MathMode math = f16 ? MathMode::fp16 : MathMode::bf16;
  const char* name = dtype_name(row.dtype);
  if (!backend.supports_math(math)) {
    std::cout << "SKIPPED: " << backend.description() << " cannot compute in " << name << "\n";
    return;
  }
  // Both runs see the same data: x and dy rounded to the dtype (what such a tensor holds), so the
  // difference is the kernel's own arithmetic and rounding, and max pooling picks the same
  // elements (rounding alone merges or reorders close values).
  CaseData d = make_case_data(c);
  for (float& v : d.x) v = f16 ? round_to_f16(v) : round_to_bf16(v);
  for (float& v : d.dy) v = f16 ? round_to_f16(v) : round_to_bf16(v);
  std::optional<test::ExpectWarning> expected;
  if (!c.expect_warning.empty()) expected.emplace(c.expect_warning);
  KernelRun ref(backend, d);
  const RunOutput f32 = ref.run(true);
  KernelRun low(backend, d, math);
  const RunOutput a = low.run(true);
  const double bound = f16 ? kF16Bound : kLowPrecisionBound,
               grad_bound = f16 ? kF16GradBound : kLowPrecisionGradBound;
  const std::string against = std::string(" (") + name + " against f32)";
  check_cross(("y" + against).c_str(), a.y, f32.y, bound * c.low_precision_y_scale);
  if (c.dx_noise) {  // 0 in real arithmetic: the 16-bit run's noise is bounded, not compared
    double largest = 0, scale = 0;
    for (float v : a.dx) largest = std::max(largest, double(std::fabs(v)));
    for (float v : d.dy) scale = std::max(scale, double(std::fabs(v)));
    INFO("dx" << against << ", 0 in real arithmetic: largest |dx| " << largest << ", bound " << bound
              << " x max |dy| " << scale);
    CHECK(largest <= bound * scale);
  } else {
    check_cross(("dx" + against).c_str(), a.dx, f32.dx, bound * row.low_precision_dx_scale);
  }
  if (!d.live.empty())
    check_cross(("parameter gradients" + against).c_str(), a.grads, f32.grads, grad_bound, d.live);
  if (!d.buffers.empty()) check_cross(("buffers" + against).c_str(), a.buffers, f32.buffers, bound);
  // A kernel with parameters computes in 16 bits (or rounds its 16-bit output): it must differ.
  if (Registry::global().takes_low_precision(row.type, backend.name()) &&
      backend.activation_dtype(math) != DType::f32 && !d.live.empty()) {
    INFO("the kernel stores " << name << " activations, yet y equals the f32 run's (rel "
                              << rel_error(a.y, f32.y) << ")");
    CHECK(rel_error(a.y, f32.y) > 1e-6);
  }
}

void run_case(const Row& row, const Case& c, Backend& backend, Backend* cpu) {
  if (row.dtype != DType::f32) return run_low_precision_case(row, c, backend);
  INFO(describe(row, c, backend.name()));
  REQUIRE(row.dtype == DType::f32);  // the host data below is float
  const CaseData d = make_case_data(c);
  std::optional<test::ExpectWarning> expected;
  if (!c.expect_warning.empty()) expected.emplace(c.expect_warning);

  KernelRun k(backend, d);
  const RunOutput a = k.run(true);
  if (c.checks & kReference) check_reference(row, d, a);
  {
    INFO("y holds NaN or infinity");
    size_t bad = 0;
    for (float v : a.y) bad += !std::isfinite(v);
    CHECK(bad == 0);
  }
  if (!d.training) {
    INFO("an eval forward changed the buffers (running statistics)");
    CHECK(same_bits(a.buffers, d.buffers));
  }
  {
    size_t wrote = 0;  // padding between parameter tensors keeps the sentinel
    for (size_t i = 0, j = 0; i < a.grads.size(); ++i) {
      if (j < d.live.size() && d.live[j] == i) {
        ++j;
        continue;
      }
      wrote += a.grads[i] != kGradientSentinel;
    }
    INFO("backward wrote " << wrote << " floats of the padding between parameter gradient tensors");
    CHECK(wrote == 0);
  }
  if (!row.input_differentiable) {
    INFO("the input is not differentiable: dx must be exactly 0");
    CHECK(a.dx == std::vector<float>(a.dx.size(), 0.f));
  }
  // Differentiable: every input, or only the first (Case::constant_inputs).
  const size_t differentiable = c.constant_inputs.empty() ? d.x.size() : size_t(c.batch * c.input.numel());
  if (differentiable < a.dx.size()) {
    INFO("the inputs after the first are token ids: their dx must be exactly 0");
    CHECK(std::vector<float>(a.dx.begin() + long(differentiable), a.dx.end()) ==
          std::vector<float>(a.dx.size() - differentiable, 0.f));
  }
  {
    // A first layer (dx null): the same parameter gradients (see Row::first_layer_margin), y and
    // buffers, bit for bit; this is also the determinism check (a second run on fresh memory).
    const RunOutput b = k.run(false);
    INFO("a second run without dx (first layer) differs from the first: y "
         << rel_error(b.y, a.y) << ", grads " << rel_error(b.grads, a.grads));
    CHECK(same_bits(b.y, a.y));
    CHECK(same_bits(b.buffers, a.buffers));
    const auto& margins =
        c.first_layer_margin.count(backend.name()) ? c.first_layer_margin : row.first_layer_margin;
    const auto margin = margins.find(backend.name());
    if (margin == margins.end()) {
      CHECK(same_bits(b.grads, a.grads));
    } else {
      size_t bad = 0, first = 0;
      for (size_t i : d.live)
        if (!(std::abs(b.grads[i] - a.grads[i]) <= margin->second * std::max(1.f, std::abs(a.grads[i]))))
          first = bad++ ? first : i;
      INFO(bad << " parameter gradients differ by more than " << margin->second
               << " max(1, |g|); first: element " << first << " with dx " << a.grads[first] << ", without "
               << b.grads[first]);
      CHECK(bad == 0);
    }
  }
  if (c.checks & kGradients) {
    if (row.input_differentiable) {
      std::vector<size_t> all(differentiable);
      for (size_t i = 0; i < all.size(); ++i) all[i] = i;
      check_finite_differences(k, "dx", d.x, a.dx, all, c.h, &KernelRun::set_input);
    }
    check_finite_differences(k, "dparam", d.params, a.grads, d.live, c.h, &KernelRun::set_param);
  }
  if (cpu && (c.checks & kCross)) {
    KernelRun ck(*cpu, d);
    const RunOutput ref = ck.run(true);
    check_cross("y", a.y, ref.y, c.exact_cross ? 0 : row.cross.y);
    check_cross("dx", a.dx, ref.dx, c.exact_cross ? 0 : row.cross.dx);
    if (!d.live.empty()) {
      check_cross("parameter gradients", a.grads, ref.grads, row.cross.grads, d.live);
      check_cross("parameter gradients without dx (first layer)", a.grads, ck.run(false).grads,
                  row.cross.grads, d.live);
    }
    if (!d.buffers.empty())
      check_cross("buffers (running statistics)", a.buffers, ref.buffers, row.cross.buffers);
  }
  if (row.property) row.property(row, c, d, a);
}

void run_kernelless_row(const Row& row, const std::string& backend) {
  INFO(row.type << " on " << backend << ": " << row.no_kernel);
  const LayerEntry& e = Registry::global().layer(row.type, "conformance");
  CHECK(e.kernels.count(backend) == 0);
  for (const Case& c : row.cases) {
    INFO(c.yaml << " on input " << c.input.batched_str());
    auto l = build_layer(c.yaml, {c.input});
    CHECK(l->aliases_input());
    CHECK(l->output_shape().numel() == c.input.numel());
  }
}

}  // namespace trainer::conformance
