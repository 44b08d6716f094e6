// The placement of buffers by lifetime (lib/model/lifetime_packing.h) that the executor uses for
// the activation gradients: no two buffers alive at the same time overlap, and buffers that never
// meet share memory.
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>

#include "lib/model/lifetime_packing.h"

using namespace trainer;

namespace {

// Every pair alive at the same time is disjoint in memory; every buffer lies inside the region.
void check_packing(const std::vector<Lifetime>& v, const std::vector<size_t>& at, size_t total,
                   size_t align) {
  REQUIRE(at.size() == v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    REQUIRE(at[i] % align == 0);
    REQUIRE(at[i] + v[i].bytes <= total);
    for (size_t k = i + 1; k < v.size(); ++k) {
      const bool together = v[i].first <= v[k].last && v[k].first <= v[i].last;
      const bool overlap = at[i] < at[k] + v[k].bytes && at[k] < at[i] + v[i].bytes;
      INFO("buffers " << i << " and " << k);
      REQUIRE(!(together && overlap && v[i].bytes && v[k].bytes));
    }
  }
}

}  // namespace

TEST_CASE("a chain of gradients, each alive for two steps, needs two buffers", "[memory][lifetime]") {
  std::vector<Lifetime> chain;
  for (int64_t t = 0; t < 20; ++t) chain.push_back({1000, t, t + 1});
  size_t total = 0;
  const std::vector<size_t> at = pack_lifetimes(chain, &total, 256);
  check_packing(chain, at, total, 256);
  REQUIRE(total == 2 * 1024);
}

TEST_CASE("buffers alive at one time all get their own memory", "[memory][lifetime]") {
  const std::vector<Lifetime> v = {{100, 0, 5}, {300, 2, 3}, {256, 3, 9}, {1, 0, 9}};
  size_t total = 0;
  const std::vector<size_t> at = pack_lifetimes(v, &total, 256);
  check_packing(v, at, total, 256);
  REQUIRE(total == 256 + 512 + 256 + 256);
}

TEST_CASE("small buffers live in the memory of large ones they never meet", "[memory][lifetime]") {
  // 0 and 1 meet; 2 meets only 0 and goes where 1 lives; 3 meets only 1 and goes where 0 lives.
  const std::vector<Lifetime> v = {{4096, 0, 4}, {4096, 3, 8}, {1024, 0, 1}, {1024, 7, 8}};
  size_t total = 0;
  const std::vector<size_t> at = pack_lifetimes(v, &total, 256);
  check_packing(v, at, total, 256);
  REQUIRE(total == 2 * 4096);
  REQUIRE(at[2] == at[1]);
  REQUIRE(at[3] == at[0]);
}

TEST_CASE("random lifetimes never collide, and the placement repeats", "[memory][lifetime]") {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 50; ++round) {
    std::vector<Lifetime> v;
    size_t sum = 0;
    for (int i = 0; i < 60; ++i) {
      const int64_t a = int64_t(rng() % 40), b = a + int64_t(rng() % 8);
      const size_t bytes = size_t(rng() % 5000);
      v.push_back({bytes, a, b});
      sum += (bytes + 255) / 256 * 256;
    }
    size_t total = 0, again_total = 0;
    const std::vector<size_t> at = pack_lifetimes(v, &total, 256);
    check_packing(v, at, total, 256);
    REQUIRE(total <= sum);
    REQUIRE(pack_lifetimes(v, &again_total, 256) == at);
    REQUIRE(again_total == total);
  }
}

// Buffers of one size (a residual network's activation gradients): as many slots as buffers alive
// at once, whatever order the caller lists them in. First fit in the callers' order put the path
// u1, u4, u2, u3 (each meeting the next) in three slots.
TEST_CASE("buffers of one size take as many slots as are alive at once", "[memory][lifetime]") {
  const std::vector<Lifetime> path = {{4096, 0, 1}, {4096, 3, 4}, {4096, 1, 2}, {4096, 2, 3}};
  size_t total = 0;
  const std::vector<size_t> at = pack_lifetimes(path, &total, 256);
  check_packing(path, at, total, 256);
  REQUIRE(total == 2 * 4096);
  std::mt19937_64 rng(11);
  for (int round = 0; round < 50; ++round) {
    std::vector<Lifetime> v;
    for (int i = 0; i < 40; ++i) {
      const int64_t a = int64_t(rng() % 30), b = a + int64_t(rng() % 6);
      v.push_back({1000, a, b});
    }
    size_t most = 0;  // buffers alive at one time, at most
    for (int64_t t = 0; t < 40; ++t) {
      size_t alive = 0;
      for (const Lifetime& l : v) alive += l.first <= t && t <= l.last ? 1 : 0;
      most = std::max(most, alive);
    }
    const std::vector<size_t> placed = pack_lifetimes(v, &total, 256);
    check_packing(v, placed, total, 256);
    REQUIRE(total == most * 1024);
  }
}
