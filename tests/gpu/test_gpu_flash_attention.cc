// The fused attention kernels (kernels/cuda/flash_attention.cu) against softmax attention and its
// gradients computed on the host in double from the same 16-bit inputs, in bf16 and fp16, on
// shapes that exercise each path: one tile and several, L = 1, lengths that are not a multiple of
// the 64-row tiles, hd 32 / 64 / 128 (hd 128's backward takes query tiles of 32), causal or not,
// and key-padding masks (front padding, random zeros, a sample with no key at all, and a front
// padding longer than a key tile, so that a row's first tile is all masked).
// Bound, each tensor (O, dq, dk, dv of one case): |gpu - ref| <= 2e-2 max|ref| + 1e-3. The kernels
// round the weights P and dS to 16 bits before their products and the outputs at the end: bf16 keeps
// 8 bits (relative 2^-9 = 2e-3 an element), and the errors of a sum over many keys add up with
// random signs, so the error stays well under 1% of the largest element; 2e-2 leaves a margin while
// a wrong fragment layout or mask (errors of the order of the values themselves) still fails. lse
// (f32 throughout): |gpu - ref| <= 2e-3 max(1, |ref|).
// Exact: no NaN or Inf anywhere (outputs and scratch start as NaN bytes, so an element the kernels
// do not write shows up), lse = +inf, O = 0 and dq = 0 for a query with no key, dk = dv = 0 for a
// masked key; a second backward over the used scratch gives the same checks. Every case prints one
// line of errors; a failure names the worst element (sample, position, head, column).
// Dropout on the weights (FlashDropout): the reference drops them with the same counter-based
// masks (lib/core/dropout_formula.h, the unit ((b H + h) L + i) L + j), at rates 0.1 and 0.5; the
// same bounds hold.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/flash_attention.cuh"
#include "lib/core/bf16.h"
#include "lib/core/counter_rng.h"
#include "lib/core/dropout_formula.h"
#include "lib/core/fp16.h"
#include "lib/core/rng.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;

namespace {

// Key-padding masks: none; or per sample s (s % 4): front padding of 5 ids, ~30% random zeros,
// every id 0, front padding of 70 ids (more than a key tile).
enum class Mask { none, mixed };

struct Case {
  int64_t batch, len, heads, hd;
  bool causal;
  Mask mask;
  float rate = 0.f;  // dropout on the weights
  int64_t d() const { return heads * hd; }
};

// The dropout masks' seed, step and layer (StepScalars on the device for the kernels).
constexpr uint64_t kDropSeed = 0x5eed, kDropStep = 41;
constexpr int kDropLayer = 3;

std::string describe(const Case& c, DType t) {
  std::ostringstream s;
  s << dtype_name(t) << " B " << c.batch << " L " << c.len << " H " << c.heads << " hd " << c.hd
    << (c.causal ? " causal" : " full") << (c.mask == Mask::mixed ? " masked" : "");
  if (c.rate > 0.f) s << " dropout " << c.rate;
  return s.str();
}

uint16_t to_bits(DType t, float f) { return t == DType::bf16 ? bf16_from_float(f) : f16_from_float(f); }
float from_bits(DType t, uint16_t b) { return t == DType::bf16 ? float_from_bf16(b) : float_from_f16(b); }

// n values ~ N(0, 1) (Box-Muller), rounded to dtype t: the bits and their values.
void normal_16bit(DType t, size_t n, uint64_t seed, std::vector<uint16_t>& bits, std::vector<float>& values) {
  SplitMix64 rng(seed);
  bits.resize(n);
  values.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const double u = 1.0 - rng.uniform(), v = rng.uniform();  // u in (0, 1]
    bits[i] = to_bits(t, float(std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * v)));
    values[i] = from_bits(t, bits[i]);
  }
}

// Token ids (B, L): 0 = masked key.
std::vector<float> make_ids(const Case& c, uint64_t seed) {
  std::vector<float> ids(size_t(c.batch * c.len), 1.f);
  SplitMix64 rng(seed);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t j = 0; j < c.len; ++j) {
      float& id = ids[size_t(b * c.len + j)];
      id = float(1 + rng.next_below(100));
      switch (b % 4) {
        case 0:
          if (j < 5) id = 0.f;
          break;
        case 1:
          if (rng.next_below(10) < 3) id = 0.f;
          break;
        case 2:
          id = 0.f;
          break;
        default:
          if (j < 70) id = 0.f;
      }
    }
  return ids;
}

// Softmax attention and the gradients of sum(O * dout), in double.
struct Reference {
  std::vector<double> o, lse, dqkv;  // (B, L, D), (B, H, L), (B, L, 3D)
  std::vector<char> empty;           // (B, L): the query sees no key
};

Reference reference(const Case& c, const std::vector<float>& qkv, const std::vector<float>& dout,
                    const std::vector<float>& ids) {
  const int64_t L = c.len, D = c.d(), hd = c.hd, ld = 3 * D;
  const double scale = 1.0 / std::sqrt(double(hd));
  Reference r;
  r.o.assign(size_t(c.batch * L * D), 0.0);
  r.lse.assign(size_t(c.batch * c.heads * L), std::numeric_limits<double>::infinity());
  r.dqkv.assign(size_t(c.batch * L * ld), 0.0);
  r.empty.assign(size_t(c.batch * L), 1);
  std::vector<double> p(static_cast<size_t>(L)), dp(static_cast<size_t>(L)), z(static_cast<size_t>(L), 1.0);
  const uint64_t stream = dropout_stream(kDropStep, kDropLayer);
  const float keep = c.rate > 0.f ? dropout_keep_scale(c.rate) : 1.f;
  std::vector<char> allowed(static_cast<size_t>(L));
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.heads; ++h)
      for (int64_t i = 0; i < L; ++i) {
        const size_t qi = size_t((b * L + i) * ld + h * hd);
        const auto key_at = [&](int64_t j, int64_t part) {
          return size_t((b * L + j) * ld + part * D + h * hd);
        };
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < L; ++j) {
          allowed[size_t(j)] = (!c.causal || j <= i) && (ids.empty() || ids[size_t(b * L + j)] != 0.f);
          if (!allowed[size_t(j)]) continue;
          double s = 0;
          for (int64_t e = 0; e < hd; ++e) s += double(qkv[qi + size_t(e)]) * qkv[key_at(j, 1) + size_t(e)];
          p[size_t(j)] = s * scale;
          m = std::max(m, p[size_t(j)]);
        }
        if (m == -std::numeric_limits<double>::infinity()) continue;  // no key: O, lse, grads as set
        r.empty[size_t(b * L + i)] = 0;
        double sum = 0;
        for (int64_t j = 0; j < L; ++j)
          if (allowed[size_t(j)]) sum += std::exp(p[size_t(j)] - m);
        r.lse[size_t((b * c.heads + h) * L + i)] = m + std::log(sum);
        const size_t oi = size_t((b * L + i) * D + h * hd);
        // Dropout: O = (P Z) V; dP = Z (dO V^T); delta = sum_j P_j dP_j; dS = P (dP - delta).
        double delta = 0;
        for (int64_t j = 0; j < L; ++j) {
          if (!allowed[size_t(j)]) continue;
          const double w = std::exp(p[size_t(j)] - m) / sum;
          p[size_t(j)] = w;
          if (c.rate > 0.f)
            z[size_t(j)] =
                dropout_mask(kDropSeed, stream, uint64_t(((b * c.heads + h) * L + i) * L + j), c.rate, keep);
          double g = 0;
          for (int64_t e = 0; e < hd; ++e) {
            const double v = qkv[key_at(j, 2) + size_t(e)];
            r.o[oi + size_t(e)] += w * z[size_t(j)] * v;
            g += double(dout[oi + size_t(e)]) * v;
          }
          dp[size_t(j)] = g * z[size_t(j)];
          delta += w * dp[size_t(j)];
        }
        for (int64_t j = 0; j < L; ++j) {
          if (!allowed[size_t(j)]) continue;
          const double ds = p[size_t(j)] * (dp[size_t(j)] - delta);
          for (int64_t e = 0; e < hd; ++e) {
            r.dqkv[qi + size_t(e)] += scale * ds * qkv[key_at(j, 1) + size_t(e)];
            r.dqkv[key_at(j, 1) + size_t(e)] += scale * ds * qkv[qi + size_t(e)];
            r.dqkv[key_at(j, 2) + size_t(e)] += p[size_t(j)] * z[size_t(j)] * dout[oi + size_t(e)];
          }
        }
      }
  return r;
}

// Errors of the elements of gpu that `part` picks (all when part < 0; else the columns
// [part D, (part + 1) D) of rows `width` wide), against the bound a max|ref| + b.
struct Errors {
  double max_err = 0, max_ref = 0, norm_diff = 0, norm_ref = 0;
  size_t worst = 0, bad = 0, nonfinite = 0;
  // Elements over the bound by (position % 16 < 8, column % 16 < 8): a fragment layout mixed up
  // shows as errors in some of the four 8x8 quarters of each 16x16 block only.
  size_t bad_quarters[4] = {0, 0, 0, 0};
  double rel_l2() const { return norm_ref > 0 ? std::sqrt(norm_diff / norm_ref) : std::sqrt(norm_diff); }
};
Errors compare(const std::vector<float>& gpu, const std::vector<double>& ref, const Case& c, int64_t width,
               int part, double a, double b) {
  const int64_t d = c.d();
  Errors e;
  const auto picked = [&](size_t i) { return part < 0 || int64_t(i) % width / d == part; };
  for (size_t i = 0; i < ref.size(); ++i)
    if (picked(i)) e.max_ref = std::max(e.max_ref, std::fabs(ref[i]));
  bool first = true;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!picked(i)) continue;
    if (!std::isfinite(gpu[i])) ++e.nonfinite;
    const double diff = std::fabs(double(gpu[i]) - ref[i]);
    const double ranked = std::isnan(diff) ? std::numeric_limits<double>::infinity() : diff;
    if (first || ranked > e.max_err) {  // the first NaN counts as the worst
      first = false;
      e.max_err = ranked;
      e.worst = i;
    }
    if (!(diff <= a * e.max_ref + b)) {
      ++e.bad;
      const int64_t pos = int64_t(i) / width % c.len, col = int64_t(i) % width % c.hd;
      ++e.bad_quarters[(pos % 16 >= 8 ? 2 : 0) + (col % 16 >= 8 ? 1 : 0)];
    }
    e.norm_diff += diff * diff;
    e.norm_ref += ref[i] * ref[i];
  }
  return e;
}

// Element i of rows (B, L, width) as (sample, position, q|k|v|o, head, column in the head).
std::string where(size_t i, const Case& c, int64_t width) {
  const int64_t e = int64_t(i), col = e % width, pos = e / width % c.len, b = e / width / c.len;
  std::ostringstream s;
  s << "sample " << b << " pos " << pos << " "
    << (width == c.d()     ? "o"
        : col / c.d() == 0 ? "q"
        : col / c.d() == 1 ? "k"
                           : "v")
    << " head " << col % c.d() / c.hd << " col " << col % c.hd;
  return s.str();
}

// One tensor's errors, for INFO.
std::string report(const Errors& e, const std::vector<float>& gpu, const std::vector<double>& ref,
                   const Case& c, int64_t width) {
  std::ostringstream s;
  s << "max err " << e.max_err << " at " << where(e.worst, c, width) << " (gpu " << gpu[e.worst] << ", ref "
    << ref[e.worst] << "), max|ref| " << e.max_ref << ", rel L2 " << e.rel_l2() << "; " << e.bad
    << " over the bound (by quarter of the 16x16 blocks, rows 0-7 | 8-15 x columns 0-7 | 8-15: "
    << e.bad_quarters[0] << " " << e.bad_quarters[1] << " " << e.bad_quarters[2] << " " << e.bad_quarters[3]
    << "), " << e.nonfinite << " not finite";
  return s.str();
}

std::vector<float> download_16bit(DType t, const Buffer& buf, size_t n) {
  const std::vector<uint16_t> bits = buf.download<uint16_t>(n);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = from_bits(t, bits[i]);
  return v;
}

void run_case(const Case& c, DType t) {
  CudaBackend& be = cuda_backend();
  const cudaStream_t s = be.stream();
  const int64_t L = c.len, D = c.d();
  const size_t rows = size_t(c.batch * L), n_qkv = rows * size_t(3 * D), n_o = rows * size_t(D),
               n_lse = size_t(c.batch * c.heads * L);
  const uint64_t seed = uint64_t(c.batch * 1000003 + L * 1009 + c.heads * 101 + c.hd * 7 + c.causal) +
                        (t == DType::bf16 ? 0 : 555);
  std::vector<uint16_t> qkv_bits, dout_bits, ids_bits;
  std::vector<float> qkv, dout;
  normal_16bit(t, n_qkv, seed, qkv_bits, qkv);
  normal_16bit(t, n_o, seed + 1, dout_bits, dout);
  const std::vector<float> ids = c.mask == Mask::mixed ? make_ids(c, seed + 2) : std::vector<float>();
  for (float id : ids) ids_bits.push_back(to_bits(t, id));
  const Reference ref = reference(c, qkv, dout, ids);

  const size_t scratch_bytes = cuda::flash_attention_backward_scratch_bytes(c.batch, L, c.heads, c.hd);
  Buffer qkv_b(be, n_qkv * 2), o_b(be, n_o * 2), lse_b(be, n_lse * 4), dout_b(be, n_o * 2),
      dqkv_b(be, n_qkv * 2), ids_b(be, rows * 2), scratch(be, scratch_bytes),
      scalars_b(be, sizeof(StepScalars));
  StepScalars sc;
  sc.seed = kDropSeed;
  sc.step = kDropStep;
  be.copy_to_device(scalars_b.get(), &sc, sizeof sc);
  const cuda::FlashDropout drop = c.rate > 0.f
                                      ? cuda::FlashDropout{c.rate, scalars_b.as<StepScalars>(), kDropLayer}
                                      : cuda::FlashDropout{};
  qkv_b.upload(qkv_bits);
  dout_b.upload(dout_bits);
  if (!ids.empty()) ids_b.upload(ids_bits);
  const void* ids_dev = ids.empty() ? nullptr : ids_b.get();
  // NaN bytes (0xffff is a NaN in bf16 and fp16) in everything the kernels write or use as scratch.
  CUDA_CHECK(cudaMemsetAsync(o_b.get(), 0xff, n_o * 2, s));
  CUDA_CHECK(cudaMemsetAsync(lse_b.get(), 0xff, n_lse * 4, s));
  CUDA_CHECK(cudaMemsetAsync(scratch.get(), 0xff, scratch_bytes, s));
  const float scale = float(1.0 / std::sqrt(double(c.hd)));
  cuda::launch_flash_attention_forward(t, qkv_b.get(), o_b.get(), lse_b.as<float>(), c.batch, L, c.heads,
                                       c.hd, c.causal, ids_dev, scale, s, drop);
  const std::vector<float> o = download_16bit(t, o_b, n_o);
  const std::vector<float> lse = lse_b.download<float>(n_lse);

  INFO(describe(c, t));
  const Errors eo = compare(o, ref.o, c, D, -1, 2e-2, 1e-3);
  INFO("O: " << report(eo, o, ref.o, c, D));
  CHECK(eo.nonfinite == 0);
  CHECK(eo.bad == 0);
  size_t lse_bad = 0, lse_first = 0;
  double lse_err = 0;
  for (size_t i = 0; i < n_lse; ++i) {
    const bool ok = std::isinf(ref.lse[i])
                        ? (std::isinf(lse[i]) && lse[i] > 0)
                        : std::fabs(lse[i] - ref.lse[i]) <= 2e-3 * std::max(1.0, std::fabs(ref.lse[i]));
    if (!std::isinf(ref.lse[i])) lse_err = std::max(lse_err, std::fabs(lse[i] - ref.lse[i]));
    if (!ok && lse_bad++ == 0) lse_first = i;
  }
  INFO("lse: max err " << lse_err << "; " << lse_bad << " wrong, the first (b h, pos) "
                       << lse_first / size_t(L) << ", " << lse_first % size_t(L) << ": gpu " << lse[lse_first]
                       << ", ref " << ref.lse[lse_first]);
  CHECK(lse_bad == 0);
  size_t o_empty = 0;
  for (size_t r = 0; r < rows; ++r)
    for (int64_t e = 0; e < D && ref.empty[r]; ++e) o_empty += o[r * size_t(D) + size_t(e)] != 0.f;
  CHECK(o_empty == 0);  // a query with no key: O exactly 0

  std::ostringstream line;
  line << "flash attention " << describe(c, t) << ": O " << eo.max_err << " / " << eo.max_ref;
  for (int run = 0; run < 2; ++run) {  // the second over the first one's scratch
    INFO("backward run " << run);
    CUDA_CHECK(cudaMemsetAsync(dqkv_b.get(), 0xff, n_qkv * 2, s));
    cuda::launch_flash_attention_backward(t, qkv_b.get(), o_b.get(), dout_b.get(), lse_b.as<float>(),
                                          dqkv_b.get(), scratch.get(), c.batch, L, c.heads, c.hd, c.causal,
                                          ids_dev, scale, s, drop);
    const std::vector<float> dqkv = download_16bit(t, dqkv_b, n_qkv);
    for (int part = 0; part < 3; ++part) {
      const char* name = part == 0 ? "dq" : part == 1 ? "dk" : "dv";
      const Errors e = compare(dqkv, ref.dqkv, c, 3 * D, part, 2e-2, 1e-3);
      INFO(name << ": " << report(e, dqkv, ref.dqkv, c, 3 * D));
      CHECK(e.nonfinite == 0);
      CHECK(e.bad == 0);
      if (run == 0) line << ", " << name << " " << e.max_err << " / " << e.max_ref;
    }
    size_t dq_empty = 0, dkv_masked = 0;
    for (size_t r = 0; r < rows; ++r) {
      const float* row = &dqkv[r * size_t(3 * D)];
      for (int64_t e = 0; e < D; ++e) {
        if (ref.empty[r]) dq_empty += row[e] != 0.f;
        if (!ids.empty() && ids[r] == 0.f) dkv_masked += (row[D + e] != 0.f) + (row[2 * D + e] != 0.f);
      }
    }
    CHECK(dq_empty == 0);    // a query with no key: dq exactly 0
    CHECK(dkv_masked == 0);  // a masked key: dk and dv exactly 0
  }
  std::cout << line.str() << " (max err / max|ref|)\n";
}

}  // namespace

TEST_CASE("gpu fused attention matches double-precision softmax attention and its gradients",
          "[gpu][flash]") {
  for (const DType t : {DType::bf16, DType::f16}) {
    REQUIRE(cuda::flash_attention_supported(t, 64));
    for (const Case& c : {Case{2, 64, 2, 64, true, Mask::none}, Case{2, 64, 2, 64, false, Mask::none},
                          Case{2, 1, 2, 64, true, Mask::none}, Case{3, 1, 1, 32, false, Mask::none},
                          Case{2, 37, 3, 64, true, Mask::none}, Case{2, 37, 2, 64, false, Mask::none},
                          Case{2, 200, 2, 32, true, Mask::none}, Case{1, 200, 2, 32, false, Mask::none},
                          Case{2, 200, 2, 128, false, Mask::none}, Case{1, 200, 2, 128, true, Mask::none},
                          Case{1, 1024, 2, 64, true, Mask::none}, Case{4, 100, 2, 64, true, Mask::mixed},
                          Case{4, 100, 2, 64, false, Mask::mixed}, Case{4, 130, 2, 128, true, Mask::mixed},
                          Case{4, 75, 2, 32, false, Mask::mixed}, Case{4, 75, 1, 32, true, Mask::mixed}})
      run_case(c, t);
  }
}

TEST_CASE("gpu fused attention drops its weights with the unfused path's masks", "[gpu][flash][dropout]") {
  for (const DType t : {DType::bf16, DType::f16})
    for (const Case& c :
         {Case{2, 64, 2, 64, true, Mask::none, 0.1f}, Case{2, 37, 3, 64, false, Mask::none, 0.5f},
          Case{1, 200, 2, 32, true, Mask::none, 0.1f}, Case{2, 200, 2, 128, false, Mask::none, 0.1f},
          Case{1, 130, 2, 128, true, Mask::none, 0.5f}, Case{4, 100, 2, 64, true, Mask::mixed, 0.2f},
          Case{1, 1024, 2, 64, true, Mask::none, 0.1f}})
      run_case(c, t);
}

TEST_CASE("gpu fused attention takes bf16 and fp16 with head dims 32, 64 and 128 only", "[gpu][flash]") {
  for (const DType t : {DType::bf16, DType::f16})
    for (const int64_t hd : {32, 64, 128}) CHECK(cuda::flash_attention_supported(t, hd));
  CHECK_FALSE(cuda::flash_attention_supported(DType::f32, 64));
  CHECK_FALSE(cuda::flash_attention_supported(DType::bf16, 48));
  CHECK_FALSE(cuda::flash_attention_supported(DType::bf16, 256));
}

// The step is captured as one CUDA graph: the launches (their shared-memory attribute, the
// scratch's memset) must capture, and a replay must give what a direct launch gives (bit for bit
// but dq, whose f32 atomic sums may add in another order).
TEST_CASE("gpu fused attention captured in a CUDA graph replays as launched directly", "[gpu][flash]") {
  CudaBackend& be = cuda_backend();
  const DType t = DType::bf16;
  const Case c{4, 100, 2, 64, true, Mask::mixed};
  const int64_t L = c.len, D = c.d();
  const size_t n_qkv = size_t(c.batch * L * 3 * D), n_o = size_t(c.batch * L * D),
               n_lse = size_t(c.batch * c.heads * L);
  std::vector<uint16_t> qkv_bits, dout_bits, ids_bits;
  std::vector<float> qkv, dout;
  normal_16bit(t, n_qkv, 11, qkv_bits, qkv);
  normal_16bit(t, n_o, 12, dout_bits, dout);
  for (float id : make_ids(c, 13)) ids_bits.push_back(to_bits(t, id));
  const size_t scratch_bytes = cuda::flash_attention_backward_scratch_bytes(c.batch, L, c.heads, c.hd);
  Buffer qkv_b(be, n_qkv * 2), o_b(be, n_o * 2), lse_b(be, n_lse * 4), dout_b(be, n_o * 2),
      dqkv_b(be, n_qkv * 2), ids_b(be, ids_bits.size() * 2), scratch(be, scratch_bytes);
  qkv_b.upload(qkv_bits);
  dout_b.upload(dout_bits);
  ids_b.upload(ids_bits);
  const float scale = 0.125f;
  const auto step = [&](cudaStream_t s) {
    cuda::launch_flash_attention_forward(t, qkv_b.get(), o_b.get(), lse_b.as<float>(), c.batch, L, c.heads,
                                         c.hd, c.causal, ids_b.get(), scale, s);
    cuda::launch_flash_attention_backward(t, qkv_b.get(), o_b.get(), dout_b.get(), lse_b.as<float>(),
                                          dqkv_b.get(), scratch.get(), c.batch, L, c.heads, c.hd, c.causal,
                                          ids_b.get(), scale, s);
  };
  const auto poison = [&] {
    CUDA_CHECK(cudaMemsetAsync(o_b.get(), 0xff, n_o * 2, be.stream()));
    CUDA_CHECK(cudaMemsetAsync(lse_b.get(), 0xff, n_lse * 4, be.stream()));
    CUDA_CHECK(cudaMemsetAsync(dqkv_b.get(), 0xff, n_qkv * 2, be.stream()));
    CUDA_CHECK(cudaMemsetAsync(scratch.get(), 0xff, scratch_bytes, be.stream()));
    be.synchronize();
  };
  poison();
  step(be.stream());
  const std::vector<uint16_t> o = o_b.download<uint16_t>(n_o), dqkv = dqkv_b.download<uint16_t>(n_qkv);
  const std::vector<float> lse = lse_b.download<float>(n_lse);

  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  step(s);
  CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    INFO("replay " << replay);
    poison();
    CUDA_CHECK(cudaGraphLaunch(exec, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    CHECK(o_b.download<uint16_t>(n_o) == o);
    const std::vector<float> lse2 = lse_b.download<float>(n_lse);
    CHECK(std::memcmp(lse2.data(), lse.data(), n_lse * 4) == 0);  // +inf rows too
    const std::vector<uint16_t> dqkv2 = dqkv_b.download<uint16_t>(n_qkv);
    size_t kv_diff = 0, q_far = 0;
    double q_max = 0;
    for (size_t i = 0; i < n_qkv; ++i) q_max = std::max(q_max, double(std::fabs(float_from_bf16(dqkv[i]))));
    for (size_t i = 0; i < n_qkv; ++i) {
      if (int64_t(i) % (3 * D) >= D)
        kv_diff += dqkv2[i] != dqkv[i];
      else
        q_far += !(std::fabs(float_from_bf16(dqkv2[i]) - float_from_bf16(dqkv[i])) <= 1e-2 * q_max);
    }
    CHECK(kv_diff == 0);
    CHECK(q_far == 0);
  }
  CUDA_CHECK(cudaGraphExecDestroy(exec));
  CUDA_CHECK(cudaGraphDestroy(graph));
  CUDA_CHECK(cudaStreamDestroy(s));
}

// Timing only (no bound): run with  trainer_gpu_tests "[.flash_bench]".
TEST_CASE("gpu fused attention timing, GPT-2 small shape", "[.flash_bench]") {
  CudaBackend& be = cuda_backend();
  const DType t = DType::bf16;
  const int64_t B = 8, L = 1024, H = 12, hd = 64, D = H * hd;
  const size_t n_qkv = size_t(B * L * 3 * D), n_o = size_t(B * L * D);
  std::vector<uint16_t> qkv(n_qkv), dout(n_o);
  const std::vector<float> r = random_vector(n_qkv, 21, -2.f, 2.f);
  for (size_t i = 0; i < n_qkv; ++i) qkv[i] = bf16_from_float(r[i]);
  for (size_t i = 0; i < n_o; ++i) dout[i] = bf16_from_float(r[i] * 0.5f);
  const size_t scratch_bytes = cuda::flash_attention_backward_scratch_bytes(B, L, H, hd);
  Buffer qkv_b(be, n_qkv * 2), o_b(be, n_o * 2), lse_b(be, size_t(B * H * L) * 4), dout_b(be, n_o * 2),
      dqkv_b(be, n_qkv * 2), scratch(be, scratch_bytes);
  qkv_b.upload(qkv);
  dout_b.upload(dout);
  const float scale = 0.125f;
  const cudaStream_t s = be.stream();
  const auto forward = [&] {
    cuda::launch_flash_attention_forward(t, qkv_b.get(), o_b.get(), lse_b.as<float>(), B, L, H, hd, true,
                                         nullptr, scale, s);
  };
  const auto backward = [&] {
    cuda::launch_flash_attention_backward(t, qkv_b.get(), o_b.get(), dout_b.get(), lse_b.as<float>(),
                                          dqkv_b.get(), scratch.get(), B, L, H, hd, true, nullptr, scale, s);
  };
  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_CHECK(cudaEventCreate(&start));
  CUDA_CHECK(cudaEventCreate(&stop));
  const int reps = 20;
  const auto time_ms = [&](const auto& f) {
    for (int i = 0; i < 3; ++i) f();  // warm-up
    CUDA_CHECK(cudaEventRecord(start, s));
    for (int i = 0; i < reps; ++i) f();
    CUDA_CHECK(cudaEventRecord(stop, s));
    CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return double(ms) / reps;
  };
  const double fwd = time_ms(forward), bwd = time_ms(backward);
  const double flops = 4.0 * double(B * H) * double(L) * double(L) * double(hd) / 2;  // causal
  std::cout << "flash attention B " << B << " L " << L << " H " << H << " hd " << hd
            << " causal bf16: forward " << fwd << " ms (" << flops / fwd / 1e9 << " TFLOP/s), backward "
            << bwd << " ms (" << 2.5 * flops / bwd / 1e9 << " TFLOP/s)\n";
  size_t nonfinite = 0;
  for (uint16_t v : dqkv_b.download<uint16_t>(n_qkv)) nonfinite += !std::isfinite(float_from_bf16(v));
  CHECK(nonfinite == 0);
  CUDA_CHECK(cudaEventDestroy(start));
  CUDA_CHECK(cudaEventDestroy(stop));
}
