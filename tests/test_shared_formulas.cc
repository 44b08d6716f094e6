// The per-element formulas that the CPU and CUDA kernels share (lib/core/*_formula*.h) and the one
// SplitMix64 generator: properties each formula must have, checked on the host (the GPU binary
// checks that the CUDA kernels give the CPU's bits).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "lib/core/counter_rng.h"
#include "lib/core/dropout_formula.h"
#include "lib/core/embedding_formula.h"
#include "lib/core/fp16.h"
#include "lib/core/optimizer_formulas.h"
#include "lib/core/rng.h"

namespace trainer {

TEST_CASE("SplitMix64 gives the reference SplitMix64 sequence for seed 0", "[formulas]") {
  SplitMix64 rng(0);
  REQUIRE(rng.next_u64() == 0xE220A8397B1DCDAFull);
  REQUIRE(rng.next_u64() == 0x6E789E6AA1B965F4ull);
  REQUIRE(rng.next_u64() == 0x06C45D188009454Full);
}

TEST_CASE("SplitMix64::counter draws splitmix64 of consecutive counters (model initialization's stream)",
          "[formulas]") {
  for (uint64_t seed : {0ull, 0x1A17ull, ~0ull}) {
    SplitMix64 rng = SplitMix64::counter(seed);
    for (uint64_t k = 0; k < 5; ++k) {
      uint64_t z = seed + k + 0x9E3779B97F4A7C15ull;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      REQUIRE(rng.next_u64() == (z ^ (z >> 31)));
    }
  }
}

TEST_CASE("embedding_row keeps integral ids in range and clamps everything else", "[formulas]") {
  const int64_t V = 10;
  const float last_f = float(V - 1);
  CHECK(embedding_row(0.f, last_f, V - 1) == 0);
  CHECK(embedding_row(3.f, last_f, V - 1) == 3);
  CHECK(embedding_row(9.f, last_f, V - 1) == 9);
  CHECK(embedding_row(2.5f, last_f, V - 1) == 2);
  CHECK(embedding_row(-4.f, last_f, V - 1) == 0);
  CHECK(embedding_row(1e9f, last_f, V - 1) == 9);
  CHECK(embedding_row(std::numeric_limits<float>::quiet_NaN(), last_f, V - 1) == 0);
  CHECK(embedding_row(std::numeric_limits<float>::infinity(), last_f, V - 1) == 9);
}

TEST_CASE("dropout_mask is 0 or 1/(1-rate), one draw per unit, and keeps about 1-rate", "[formulas]") {
  const float rate = 0.25f, scale = dropout_keep_scale(rate);
  REQUIRE(scale == 1.f / 0.75f);
  const uint64_t stream = dropout_stream(7, 2);
  int64_t kept = 0;
  const int64_t channel = 4, n = 40000;
  for (int64_t i = 0; i < n; ++i) {
    const float m = dropout_mask(99, stream, uint64_t(i / channel), rate, scale);
    REQUIRE((m == 0.f || m == scale));
    REQUIRE(m == (counter_uniform(99, stream, uint64_t(i / channel)) >= rate ? scale : 0.f));
    kept += m != 0.f;
  }
  CHECK(std::abs(double(kept) / double(n) - 0.75) < 0.02);
  for (uint64_t u = 0; u < 100; ++u) REQUIRE(dropout_mask(99, stream, u, 0.f, 1.f) == 1.f);
}

TEST_CASE("sgd_update: plain, first momentum step, then momentum with dampening and Nesterov", "[formulas]") {
  float w = 1.f, v = 123.f;
  sgd_update(sgd_coeffs(0.f, 0.f, 0.f, false, 0.5f, 0), w, 0.25f, v);
  CHECK(w == 0.875f);
  CHECK(v == 123.f);  // untouched without momentum
  w = 1.f;
  sgd_update(sgd_coeffs(0.5f, 0.5f, 0.f, false, 1.f, 0), w, 0.25f, v);
  CHECK(v == 0.25f);  // b = g' on the first step
  CHECK(w == 0.75f);
  sgd_update(sgd_coeffs(0.5f, 0.5f, 0.f, true, 1.f, 1), w, 0.25f, v);
  CHECK(v == 0.25f);           // 0.5 * 0.25 + (1 - 0.5) * 0.25
  CHECK(w == 0.75f - 0.375f);  // Nesterov: g' + mu * b
}

TEST_CASE("adam_update's first step moves each weight by about lr against its gradient", "[formulas]") {
  for (bool decoupled : {false, true}) {
    float w = 2.f, m = 0.f, v = 0.f;
    const float lr = 0.01f;
    const AdamCoeffs c = adam_coeffs(0.9f, 0.999f, 1e-8f, 0.f, decoupled, lr, 1.f - 0.9f, 1.f - 0.999f);
    adam_update(c, w, -3.f, m, v);
    CHECK(w == Approx(2.f + lr).epsilon(1e-5));
    CHECK(m == Approx(-0.3f));
    CHECK(v == Approx(0.009f).epsilon(1e-4));  // (1 - 0.999f) is 0.00100005
  }
  float w = 2.f, m = 0.f, v = 0.f;  // AdamW decays the weight before the step
  adam_update(adam_coeffs(0.9f, 0.999f, 1e-8f, 0.5f, true, 0.1f, 0.1f, 0.001f), w, 0.f, m, v);
  CHECK(w == Approx(2.f * (1.f - 0.05f)));
}

TEST_CASE("rmsprop_update follows torch.optim.RMSprop on one element", "[formulas]") {
  float w = 1.f, sq = 0.f, buf = 0.f, avg = 0.f;
  rmsprop_update(rmsprop_coeffs(0.5f, 0.f, 0.f, 0.f, false, 0.1f), w, 2.f, sq, buf, avg);
  CHECK(sq == 2.f);  // 0.5 * 0 + 0.5 * 4
  CHECK(w == Approx(1.f - 0.1f * 2.f / std::sqrt(2.f)));
  CHECK(avg == 0.f);  // only when centered
  rmsprop_update(rmsprop_coeffs(0.5f, 0.f, 0.9f, 0.f, true, 0.1f), w, 2.f, sq, buf, avg);
  CHECK(avg == 1.f);
  CHECK(buf == Approx(2.f / std::sqrt(3.f - 1.f)));  // var = sq - avg^2 = 3 - 1
}

TEST_CASE("fp16 on the host rounds to nearest even like __float2half_rn, subnormals and overflow included",
          "[formulas]") {
  REQUIRE(f16_from_float(1.f) == 0x3c00);
  REQUIRE(f16_from_float(-2.f) == 0xc000);
  REQUIRE(f16_from_float(65504.f) == 0x7bff);
  REQUIRE(f16_from_float(65519.f) == 0x7bff);               // below the halfway point to 65536
  REQUIRE(f16_from_float(65520.f) == 0x7c00);               // halfway, to even: infinity
  REQUIRE(f16_from_float(std::ldexp(1.f, -14)) == 0x0400);  // the smallest normal
  REQUIRE(f16_from_float(std::ldexp(1.f, -24)) == 0x0001);  // the smallest subnormal
  REQUIRE(f16_from_float(std::ldexp(1.f, -25)) == 0x0000);  // halfway to it, to even: zero
  REQUIRE(f16_from_float(std::ldexp(1.5f, -25)) == 0x0001);
  REQUIRE(f16_from_float(std::ldexp(3.f, -25)) == 0x0002);        // 1.5 units: to even
  REQUIRE(f16_from_float(1.f + std::ldexp(1.f, -11)) == 0x3c00);  // halfway between 1 and 1+2^-10: even
  REQUIRE(f16_from_float(1.f + std::ldexp(3.f, -11)) == 0x3c02);
  REQUIRE(f16_from_float(std::numeric_limits<float>::infinity()) == 0x7c00);
  REQUIRE(std::isnan(float_from_f16(f16_from_float(std::nanf("")))));
  // Every fp16 value comes back exactly.
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const uint16_t b = uint16_t(h);
    if ((b & 0x7c00u) == 0x7c00u && (b & 0x3ffu)) continue;  // NaNs
    INFO("fp16 bits " << h);
    REQUIRE(f16_from_float(float_from_f16(b)) == b);
  }
  REQUIRE(float_from_f16(0x0001) == std::ldexp(1.f, -24));
  REQUIRE(float_from_f16(0x7bff) == 65504.f);
}

}  // namespace trainer
