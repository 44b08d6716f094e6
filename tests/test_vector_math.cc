// kernels/cpu/vector_math.h against libm in double: e^x, e^x - 1, sigmoid and tanh over their
// whole float range (every 2^-12 of [-90, 90] and a geometric sweep of tiny and huge magnitudes),
// four and sixteen at a time (also in a function cloned for AVX-512) equal to one at a time bit for
// bit, the saturation past the clamp, and NaN.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/vector_math.h"

using namespace trainer::cpu;

namespace {

// Error of got against the exact value in units of the float spacing at the exact value.
double ulps(float got, double exact) {
  const double spacing = std::ldexp(1.0, std::ilogb(std::max(std::fabs(exact), 1e-38)) - 23);
  return std::fabs(double(got) - exact) / spacing;
}

std::vector<float> sweep() {
  std::vector<float> xs;
  for (double x = -90; x <= 90; x += 1.0 / 4096) xs.push_back(float(x));
  for (double m = 1e-30; m < 1e30; m *= 1.37) {
    xs.push_back(float(m));
    xs.push_back(float(-m));
  }
  xs.push_back(0.f);
  xs.push_back(-0.f);
  return xs;
}

// f four and sixteen at a time, the latter also in a function cloned for AVX-512 (the clone the
// CPU has runs: on an AVX-512 machine, zmm registers).
template <class F>
TRAINER_AVX512_CLONES void sixteen_at_a_time(const float* xs, size_t n, float* out, F f) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) store(out + i, f(load<f16>(xs + i)));
  for (; i < n; ++i) out[i] = f(xs[i]);
}

template <class F>
std::vector<float> both_ways(const std::vector<float>& xs, F f) {
  std::vector<float> one(xs.size()), four(xs.size()), sixteen(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) one[i] = f(xs[i]);
  size_t i = 0;
  for (; i + 4 <= xs.size(); i += 4) store(four.data() + i, f(load<f4>(xs.data() + i)));
  for (; i < xs.size(); ++i) four[i] = f(xs[i]);
  CHECK(std::memcmp(one.data(), four.data(), one.size() * sizeof(float)) == 0);
  sixteen_at_a_time(xs.data(), xs.size(), sixteen.data(), f);
  CHECK(std::memcmp(one.data(), sixteen.data(), one.size() * sizeof(float)) == 0);
  return one;
}

}  // namespace

TEST_CASE("vector exp, sigmoid and tanh agree with libm within a few ulp", "[vector_math]") {
  const std::vector<float> xs = sweep();
  const auto e = both_ways(
      xs, [](auto x) __attribute__((always_inline)) { return vexp(x); });
  const auto em1 = both_ways(
      xs, [](auto x) __attribute__((always_inline)) { return vexpm1(x); });
  const auto sig = both_ways(
      xs, [](auto x) __attribute__((always_inline)) { return vsigmoid(x); });
  const auto th = both_ways(
      xs, [](auto x) __attribute__((always_inline)) { return vtanh(x); });
  double worst_e = 0, worst_em1 = 0, worst_sig = 0, worst_th = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double x = xs[i];
    if (x >= -87 && x <= 88) {
      worst_e = std::max(worst_e, ulps(e[i], std::exp(x)));
      worst_em1 = std::max(worst_em1, ulps(em1[i], std::expm1(x)));
    }
    // sigmoid below x = -88 is past the clamp (e^-x saturates at 1.65e38): under 1e-38 there.
    const double s = 1 / (1 + std::exp(-x));
    if (x >= -88)
      worst_sig = std::max(worst_sig, ulps(sig[i], s));
    else
      CHECK(sig[i] <= 1e-38f);
    worst_th = std::max(worst_th, ulps(th[i], std::tanh(x)));
  }
  INFO("worst ulp: exp " << worst_e << ", expm1 " << worst_em1 << ", sigmoid " << worst_sig << ", tanh "
                         << worst_th);
  CHECK(worst_e <= 1.5);
  CHECK(worst_em1 <= 2.5);
  CHECK(worst_sig <= 2.5);
  CHECK(worst_th <= 3);
  // Past the clamp: finite and saturated; NaN stays NaN.
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isfinite(vexp(inf)));
  CHECK(vexp(inf) > 1e38f);
  CHECK(vexp(-inf) < 2e-38f);
  CHECK(vtanh(inf) == 1.f);
  CHECK(vtanh(-inf) == -1.f);
  CHECK(vsigmoid(inf) == 1.f);
  CHECK(vsigmoid(-inf) < 1e-37f);
  CHECK(vtanh(0.f) == 0.f);
  CHECK(std::isnan(vexp(nan)));
  CHECK(std::isnan(vtanh(nan)));
  CHECK(std::isnan(vsigmoid(nan)));
}
