// layer_norm and rms_norm on the GPU (kernels/cuda/layer_norm.cu) against a host reference in double on
// the same (rounded) inputs: f32, bf16 and fp16 rows of 1, 7, 64, 768, 1000, 4097 and 8193 columns
// (one warp a row, several, and wider than any register shape), with and without bias; 16-byte vectors
// where rows are aligned and scalars where x sits one element off. The backward adds into dx when
// asked, writes dw and db without dx, and gives the same bits on every run.
//   y, dx: relative error < 1e-5 in f32; 16-bit: against the reference rounded once to the dtype,
//   < 1e-3. stats, dw, db (f32 sums in every dtype): < 1e-5. dx's error is taken relative to the
//   larger of its norm and that of the terms it is the difference of, inv dy w: rms_norm of one
//   column cancels them to inv dy w eps / (x^2 + eps), which f32 cannot resolve.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cuda/add.cuh"
#include "kernels/cuda/layer_norm.cuh"
#include "lib/core/bf16.h"
#include "lib/core/fp16.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;

namespace {

constexpr float kEps = 1e-5f;

struct Norm {
  bool rms = false, bias = true;
};

// Inputs exactly representable in the dtype under test: x, dy (rows, d); w, b (d); dx0 (rows, d),
// what dx holds before an accumulating backward.
struct Inputs {
  std::vector<float> x, dy, w, b, dx0;
};

struct Outputs {
  std::vector<float> y, stats, dx, dw, db;
  std::vector<float> dx_terms;  // the reference's inv dy w (+ dx0): the scale of dx's rounding
};

float round_to(DType t, float v) {
  if (t == DType::bf16) return round_to_bf16(v);
  if (t == DType::f16) return float_from_f16(f16_from_float(v));
  return v;
}
std::vector<float> rounded(DType t, std::vector<float> v) {
  for (float& f : v) f = round_to(t, f);
  return v;
}

std::vector<uint8_t> encode(DType t, const std::vector<float>& v) {
  const size_t es = dtype_bytes(t);
  std::vector<uint8_t> out(v.size() * es);
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::f32) {
      std::memcpy(&out[4 * i], &v[i], 4);
    } else {
      const uint16_t h = t == DType::bf16 ? bf16_from_float(v[i]) : f16_from_float(v[i]);
      std::memcpy(&out[2 * i], &h, 2);
    }
  }
  return out;
}
std::vector<float> decode(DType t, const std::vector<uint8_t>& b) {
  const size_t es = dtype_bytes(t);
  std::vector<float> v(b.size() / es);
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::f32) {
      std::memcpy(&v[i], &b[4 * i], 4);
    } else {
      uint16_t h;
      std::memcpy(&h, &b[2 * i], 2);
      v[i] = t == DType::bf16 ? float_from_bf16(h) : float_from_f16(h);
    }
  }
  return v;
}

Inputs make_inputs(DType t, int64_t rows, int64_t d, uint64_t seed) {
  const size_t n = size_t(rows * d);
  Inputs in;
  in.x = random_vector(n, seed, -2.f, 3.f);
  for (size_t i = 0; i < n; ++i) in.x[i] += 0.01f * float(i % size_t(d) % 97);  // column offsets
  in.x = rounded(t, in.x);
  in.dy = rounded(t, random_vector(n, seed + 1));
  in.w = random_vector(size_t(d), seed + 2, 0.5f, 1.5f);
  in.b = random_vector(size_t(d), seed + 3);
  in.dx0 = rounded(t, random_vector(n, seed + 4, -0.5f, 0.5f));
  return in;
}

// An activation of n elements of dtype t on the device, `shift` elements past a 256-byte aligned
// address (shift 1: no row starts 16-byte aligned, so the kernels take scalars).
class Placed {
 public:
  Placed(CudaBackend& be, DType t, size_t n, int64_t shift)
      : be_(be),
        t_(t),
        n_(n),
        buf_(be, (n + 16) * dtype_bytes(t)),
        p_(static_cast<char*>(buf_.get()) + shift * int64_t(dtype_bytes(t))) {}
  void* get() const { return p_; }
  void upload(const std::vector<float>& v) {
    const std::vector<uint8_t> b = encode(t_, v);
    be_.copy_to_device(p_, b.data(), b.size());
  }
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> b(n_ * dtype_bytes(t_));
    be_.copy_to_host(b.data(), p_, b.size());
    return b;
  }
  std::vector<float> values() const { return decode(t_, bytes()); }

 private:
  CudaBackend& be_;
  DType t_;
  size_t n_;
  Buffer buf_;
  char* p_;
};

struct RunOptions {
  int64_t x_shift = 0;      // elements x starts past an aligned address
  bool want_dx = true;      // false: dx null
  bool accumulate = false;  // dx preset to dx0, the gradient added into it
  int backward_passes = 1;  // passes of the backward (each over the same dx0 when accumulating)
};

// Forward then backward on the GPU; dx_bytes, dw_runs, db_runs: every backward pass's dx (raw), dw and db.
struct GpuRun {
  Outputs out;
  std::vector<std::vector<uint8_t>> dx_bytes;
  std::vector<std::vector<float>> dw_runs, db_runs;
};

GpuRun run_gpu(DType t, int64_t rows, int64_t d, Norm nm, const Inputs& in, const RunOptions& o) {
  CudaBackend& be = cuda_backend();
  const size_t n = size_t(rows * d);
  Placed x(be, t, n, o.x_shift), y(be, t, n, 0), dy(be, t, n, 0), dx(be, t, n, 0);
  x.upload(in.x);
  dy.upload(in.dy);
  const int64_t chunks = cuda::layer_norm_chunks(rows, d);
  Buffer params(be, size_t(2 * d) * 4), grads(be, size_t(2 * d) * 4),
      work(be, size_t(2 * rows + 2 * chunks * d) * 4);
  std::vector<float> p = in.w;
  p.insert(p.end(), in.b.begin(), in.b.end());
  params.upload(p);
  float* w = params.as<float>();
  float* b = nm.bias ? w + d : nullptr;
  float* dw = grads.as<float>();
  float* db = nm.bias ? dw + d : nullptr;
  float* stats = work.as<float>();
  float* partials = stats + 2 * rows;
  cuda::launch_layer_norm_forward(t, x.get(), w, b, y.get(), stats, rows, d, kEps, nm.rms, be.stream());
  GpuRun r;
  r.out.y = y.values();
  r.out.stats = work.download(size_t(2 * rows));
  for (int pass = 0; pass < o.backward_passes; ++pass) {
    if (o.accumulate) dx.upload(in.dx0);
    grads.fill(NAN, size_t(2 * d));  // overwritten, never added into
    cuda::launch_layer_norm_backward(t, x.get(), dy.get(), w, stats, o.want_dx ? dx.get() : nullptr,
                                     o.accumulate, dw, db, partials, rows, d, nm.rms, be.stream());
    const std::vector<float> g = grads.download(size_t(2 * d));
    r.dw_runs.emplace_back(g.begin(), g.begin() + d);
    if (nm.bias) r.db_runs.emplace_back(g.begin() + d, g.end());
    if (o.want_dx) r.dx_bytes.push_back(dx.bytes());
  }
  r.out.dw = r.dw_runs.back();
  if (nm.bias) r.out.db = r.db_runs.back();
  if (o.want_dx) r.out.dx = decode(t, r.dx_bytes.back());
  return r;
}

// The reference in double; y and dx rounded once to t (f32: to float).
Outputs reference(DType t, int64_t rows, int64_t d, Norm nm, const Inputs& in, bool accumulate) {
  Outputs o;
  o.y.resize(size_t(rows * d));
  o.dx.resize(size_t(rows * d));
  std::vector<double> dw(size_t(d), 0.0), db(size_t(d), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = &in.x[size_t(r * d)];
    const float* dy = &in.dy[size_t(r * d)];
    double mean = 0;
    if (!nm.rms) {
      for (int64_t j = 0; j < d; ++j) mean += x[j];
      mean /= double(d);
    }
    double sq = 0;
    for (int64_t j = 0; j < d; ++j) sq += (x[j] - mean) * (x[j] - mean);
    const double inv = 1.0 / std::sqrt(sq / double(d) + double(kEps));
    for (int64_t j = 0; j < d; ++j)
      o.dx_terms.push_back(
          float(inv * dy[j] * in.w[size_t(j)] + (accumulate ? double(in.dx0[size_t(r * d + j)]) : 0.0)));
    o.stats.push_back(float(mean));
    o.stats.push_back(float(inv));
    double sum_g = 0, sum_gx = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double xhat = (x[j] - mean) * inv, g = double(dy[j]) * in.w[size_t(j)];
      o.y[size_t(r * d + j)] = round_to(t, float(xhat * in.w[size_t(j)] + (nm.bias ? in.b[size_t(j)] : 0.0)));
      sum_g += g;
      sum_gx += g * xhat;
      dw[size_t(j)] += dy[j] * xhat;
      db[size_t(j)] += dy[j];
    }
    const double mean_g = nm.rms ? 0.0 : sum_g / double(d), mean_gx = sum_gx / double(d);
    for (int64_t j = 0; j < d; ++j) {
      const double xhat = (x[j] - mean) * inv, g = double(dy[j]) * in.w[size_t(j)];
      double v = inv * (g - mean_g - xhat * mean_gx);
      if (accumulate) v += in.dx0[size_t(r * d + j)];
      o.dx[size_t(r * d + j)] = round_to(t, float(v));
    }
  }
  for (int64_t j = 0; j < d; ++j) {
    o.dw.push_back(float(dw[size_t(j)]));
    if (nm.bias) o.db.push_back(float(db[size_t(j)]));
  }
  return o;
}

double activation_bound(DType t) { return t == DType::f32 ? 1e-5 : 1e-3; }

// ||a - ref|| / max(||ref||, ||terms||).
double error_at_scale(const std::vector<float>& a, const std::vector<float>& ref,
                      const std::vector<float>& terms) {
  REQUIRE(a.size() == ref.size());
  double diff = 0, norm = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    norm += double(ref[i]) * ref[i];
    scale += double(terms[i]) * terms[i];
  }
  const double at = std::max(norm, scale);
  return at > 0 ? std::sqrt(diff / at) : std::sqrt(diff);
}

void check_against_reference(DType t, const Outputs& gpu, const Outputs& ref, bool with_dx) {
  CHECK(rel_error(gpu.y, ref.y) < activation_bound(t));
  CHECK(rel_error(gpu.stats, ref.stats) < 1e-5);
  if (with_dx) CHECK(error_at_scale(gpu.dx, ref.dx, ref.dx_terms) < activation_bound(t));
  CHECK(rel_error(gpu.dw, ref.dw) < 1e-5);
  CHECK(rel_error(gpu.db, ref.db) < 1e-5);
}

const char* norm_name(Norm nm) {
  return nm.rms ? (nm.bias ? "rms_norm with bias" : "rms_norm")
                : (nm.bias ? "layer_norm" : "layer_norm without bias");
}

const Norm kNorms[] = {{false, true}, {false, false}, {true, false}, {true, true}};

}  // namespace

TEST_CASE("gpu layer_norm and rms_norm match a double-precision reference", "[gpu][layer_norm]") {
  struct Size {
    int64_t rows, d;
  };
  const Size sizes[] = {{1, 1},      {3, 1},    {1, 7},    {3, 7},      {1, 64},   {3, 64},
                        {300, 64},   {1, 768},  {3, 768},  {8192, 768}, {1, 1000}, {3, 1000},
                        {300, 1000}, {1, 4097}, {3, 4097}, {40, 4097},  {3, 8193}};
  uint64_t seed = 100;
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (const Size& s : sizes)
      for (const Norm& nm : kNorms) {
        INFO(dtype_name(t) << " " << norm_name(nm) << " rows " << s.rows << " d " << s.d);
        const Inputs in = make_inputs(t, s.rows, s.d, seed += 10);
        const GpuRun g = run_gpu(t, s.rows, s.d, nm, in, RunOptions());
        check_against_reference(t, g.out, reference(t, s.rows, s.d, nm, in, false), true);
      }
}

TEST_CASE("gpu layer_norm backward adds into dx when asked, and writes dw and db without dx",
          "[gpu][layer_norm]") {
  uint64_t seed = 500;
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t d : {7, 768, 4097})
      for (const Norm& nm : {Norm{false, true}, Norm{true, false}}) {
        const int64_t rows = d == 768 ? 64 : 3;
        INFO(dtype_name(t) << " " << norm_name(nm) << " rows " << rows << " d " << d);
        const Inputs in = make_inputs(t, rows, d, seed += 10);
        RunOptions acc;
        acc.accumulate = true;
        const GpuRun g = run_gpu(t, rows, d, nm, in, acc);
        check_against_reference(t, g.out, reference(t, rows, d, nm, in, true), true);
        RunOptions no_dx;
        no_dx.want_dx = false;
        const GpuRun h = run_gpu(t, rows, d, nm, in, no_dx);
        check_against_reference(t, h.out, reference(t, rows, d, nm, in, false), false);
      }
}

TEST_CASE("gpu layer_norm backward gives the same bits on every run", "[gpu][layer_norm]") {
  for (DType t : {DType::f32, DType::bf16})
    for (int64_t d : {768, 4097}) {
      const int64_t rows = d == 768 ? 8192 : 40;
      INFO(dtype_name(t) << " rows " << rows << " d " << d);
      const Inputs in = make_inputs(t, rows, d, 900 + uint64_t(d));
      RunOptions twice;
      twice.backward_passes = 2;
      const GpuRun g = run_gpu(t, rows, d, Norm{false, true}, in, twice);
      REQUIRE(g.dw_runs.size() == 2);
      CHECK(std::memcmp(g.dw_runs[0].data(), g.dw_runs[1].data(), size_t(d) * 4) == 0);
      CHECK(std::memcmp(g.db_runs[0].data(), g.db_runs[1].data(), size_t(d) * 4) == 0);
      CHECK(g.dx_bytes[0] == g.dx_bytes[1]);
      const GpuRun again = run_gpu(t, rows, d, Norm{false, true}, in, RunOptions());
      CHECK(std::memcmp(g.dw_runs[0].data(), again.out.dw.data(), size_t(d) * 4) == 0);
      CHECK(std::memcmp(g.db_runs[0].data(), again.out.db.data(), size_t(d) * 4) == 0);
    }
}

TEST_CASE("gpu layer_norm rows one element off 16-byte alignment take scalars", "[gpu][layer_norm]") {
  uint64_t seed = 700;
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t d : {64, 768, 1000})
      for (const Norm& nm : {Norm{false, true}, Norm{true, false}}) {
        const int64_t rows = 33;
        INFO(dtype_name(t) << " " << norm_name(nm) << " rows " << rows << " d " << d);
        const Inputs in = make_inputs(t, rows, d, seed += 10);
        RunOptions off;
        off.x_shift = 1;
        off.accumulate = true;
        const GpuRun g = run_gpu(t, rows, d, nm, in, off);
        check_against_reference(t, g.out, reference(t, rows, d, nm, in, true), true);
      }
}

// The add before a residual stream's layer norm, done by the layer norm's forward (x2 and sum: the
// executor's AddHandoff): the sum has the add kernel's bits (summed in f32, rounded to the dtype),
// and y and the statistics are the layer norm's of that sum, bit for bit; the sum may be written
// over x. Rows aligned (16-byte vectors), one element off (scalars) and wider than any register
// shape (the add, then the wide kernel).
TEST_CASE("gpu layer_norm forward with the add before it matches the add, then the layer norm",
          "[gpu][layer_norm][add]") {
  CudaBackend& be = cuda_backend();
  uint64_t seed = 1300;
  for (DType t : {DType::f32, DType::bf16, DType::f16})
    for (int64_t d : {7, 768, 1000, 8193})
      for (int64_t shift : {0, 1})
        for (bool in_place : {false, true})
          for (const Norm& nm : {Norm{false, true}, Norm{true, false}}) {
            const int64_t rows = d > 1000 ? 9 : 67;
            const size_t n = size_t(rows * d);
            INFO(dtype_name(t) << " " << norm_name(nm) << " d " << d << " shift " << shift
                               << (in_place ? " sum over x" : ""));
            const Inputs in = make_inputs(t, rows, d, seed += 10);
            const std::vector<float> x2v = rounded(t, random_vector(n, seed + 5, -1.f, 1.f));
            Placed x(be, t, n, shift), x2(be, t, n, shift), sum(be, t, n, shift), y(be, t, n, 0);
            Placed rx(be, t, n, shift), rx2(be, t, n, shift), rsum(be, t, n, shift), ry(be, t, n, 0);
            for (Placed* p : {&x, &rx}) p->upload(in.x);
            for (Placed* p : {&x2, &rx2}) p->upload(x2v);
            Buffer params(be, size_t(2 * d) * 4), stats(be, size_t(2 * rows) * 4),
                rstats(be, size_t(2 * rows) * 4);
            std::vector<float> p = in.w;
            p.insert(p.end(), in.b.begin(), in.b.end());
            params.upload(p);
            const float* w = params.as<float>();
            const float* b = nm.bias ? w + d : nullptr;
            void* s = in_place ? x.get() : sum.get();
            cuda::launch_layer_norm_forward(t, x.get(), w, b, y.get(), stats.as<float>(), rows, d, kEps,
                                            nm.rms, be.stream(), x2.get(), s);
            cuda::launch_add(t, rx.get(), rx2.get(), rsum.get(), int64_t(n), be.stream());
            cuda::launch_layer_norm_forward(t, rsum.get(), w, b, ry.get(), rstats.as<float>(), rows, d, kEps,
                                            nm.rms, be.stream());
            CHECK((in_place ? x.bytes() : sum.bytes()) == rsum.bytes());
            CHECK(y.bytes() == ry.bytes());
            CHECK(stats.download(size_t(2 * rows)) == rstats.download(size_t(2 * rows)));
            std::vector<float> want = rsum.values(), sums(n);
            for (size_t i = 0; i < n; ++i) sums[i] = round_to(t, in.x[i] + x2v[i]);  // the add's rule
            CHECK(want == sums);
          }
}
