// BatchLoader: epoch coverage and order, determinism, partial and dropped batches, the
// normalization formula, error propagation from the worker, and clean shutdown.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <memory>

#include "datasets/batch_loader.h"
#include "lib/core/error.h"
#include "lib/core/shard.h"
#include "lib/core/usable_cores.h"

using namespace trainer;

namespace {

// n samples of shape (1) holding their own index; label = index % 7.
Dataset indexed(int64_t n) {
  Dataset d;
  d.name = "indexed";
  d.sample_shape = Shape{1};
  d.dtype = SampleDtype::f32;
  d.num_classes = 7;
  for (int64_t i = 0; i < n; ++i) {
    d.f32.push_back(static_cast<float>(i));
    d.labels.push_back(static_cast<int32_t>(i % 7));
  }
  return d;
}

// The sample indexes of one epoch in delivery order; also checks each label matches its sample.
std::vector<int64_t> epoch_order(BatchLoader& loader, int64_t epoch, std::vector<int64_t>* rows = nullptr) {
  loader.start_epoch(epoch);
  std::vector<int64_t> order;
  const float* x = nullptr;
  const int32_t* y = nullptr;
  int64_t n = 0;
  while (loader.next(&x, &y, &n)) {
    if (rows) rows->push_back(n);
    for (int64_t r = 0; r < n; ++r) {
      const auto idx = static_cast<int64_t>(x[r]);
      if (y[r] != idx % 7) throw std::logic_error("label does not match its sample");
      order.push_back(idx);
    }
  }
  return order;
}

std::vector<int64_t> iota_vector(int64_t n) {
  std::vector<int64_t> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

}  // namespace

TEST_CASE("BatchLoader without shuffle yields samples in order with a partial last batch", "[datasets]") {
  const Dataset d = indexed(23);
  BatchLoader loader(d, 5, false, false, {}, 1);
  REQUIRE(loader.batches_per_epoch() == 5);
  std::vector<int64_t> rows;
  REQUIRE(epoch_order(loader, 0, &rows) == iota_vector(23));
  REQUIRE(rows == std::vector<int64_t>{5, 5, 5, 5, 3});
}

TEST_CASE("BatchLoader with drop_last omits the final partial batch", "[datasets]") {
  const Dataset d = indexed(23);
  BatchLoader loader(d, 5, false, true, {}, 1);
  REQUIRE(loader.batches_per_epoch() == 4);
  std::vector<int64_t> rows;
  REQUIRE(epoch_order(loader, 0, &rows) == iota_vector(20));
  REQUIRE(rows == std::vector<int64_t>{5, 5, 5, 5});
  REQUIRE_THROWS_WITH(BatchLoader(d, 24, false, true, {}, 1), Catch::Contains("fewer than one batch"));
  BatchLoader whole(d, 24, false, false, {}, 1);  // one partial batch is fine without drop_last
  REQUIRE(whole.batches_per_epoch() == 1);
}

TEST_CASE("BatchLoader shuffling covers every sample exactly once per epoch", "[datasets]") {
  const Dataset d = indexed(103);
  BatchLoader loader(d, 10, true, false, {}, 99);
  for (int64_t epoch = 0; epoch < 5; ++epoch) {
    std::vector<int64_t> order = epoch_order(loader, epoch);
    REQUIRE(order != iota_vector(103));
    std::sort(order.begin(), order.end());
    REQUIRE(order == iota_vector(103));
  }
}

TEST_CASE("BatchLoader shuffles differently each epoch, identically for the same seed", "[datasets]") {
  const Dataset d = indexed(64);
  BatchLoader a(d, 8, true, false, {}, 5), b(d, 8, true, false, {}, 5), c(d, 8, true, false, {}, 6);
  const std::vector<int64_t> a0 = epoch_order(a, 0), a1 = epoch_order(a, 1);
  REQUIRE(a0 != a1);
  REQUIRE(epoch_order(b, 1) == a1);  // epochs may be requested in any order
  REQUIRE(epoch_order(b, 0) == a0);
  REQUIRE(epoch_order(c, 0) != a0);
  REQUIRE(epoch_order(a, 0) == a0);  // repeatable within one loader too
}

TEST_CASE("BatchLoader normalizes per channel as (x * scale - mean) / std of each channel", "[datasets]") {
  Dataset d;  // 2 samples of shape (2, 1, 2): channel 0 then channel 1
  d.name = "pixels";
  d.sample_shape = Shape{2, 1, 2};
  d.dtype = SampleDtype::u8;
  d.num_classes = 2;
  d.u8 = {0, 255, 51, 102, 10, 20, 30, 40};
  d.labels = {1, 0};
  Normalization norm;
  norm.scale = 1.f / 255.f;
  norm.mean = {0.5f, 0.25f};
  norm.std = {0.5f, 0.125f};
  BatchLoader loader(d, 2, false, false, norm, 0);
  loader.start_epoch(0);
  const float* x = nullptr;
  const int32_t* y = nullptr;
  int64_t rows = 0;
  REQUIRE(loader.next(&x, &y, &rows));
  REQUIRE(rows == 2);
  for (int i = 0; i < 8; ++i) {
    const int c = (i / 2) % 2;
    const double expected = (d.u8[i] / 255.0 - norm.mean[c]) / norm.std[c];
    REQUIRE(x[i] == Approx(expected).margin(1e-5));
  }
  REQUIRE(y[0] == 1);
  REQUIRE(y[1] == 0);
  REQUIRE_FALSE(loader.next(&x, &y, &rows));
}

TEST_CASE("BatchLoader applies a single mean/std to every channel and defaults to identity", "[datasets]") {
  const Dataset d = indexed(4);
  Normalization norm;
  norm.mean = {1.f};
  norm.std = {2.f};
  BatchLoader loader(d, 4, false, false, norm, 0);
  loader.start_epoch(0);
  const float* x = nullptr;
  const int32_t* y = nullptr;
  int64_t rows = 0;
  REQUIRE(loader.next(&x, &y, &rows));
  REQUIRE(std::vector<float>(x, x + 4) == std::vector<float>{-0.5f, 0.f, 0.5f, 1.f});
  BatchLoader identity(d, 4, false, false, {}, 0);
  identity.start_epoch(0);
  REQUIRE(identity.next(&x, &y, &rows));
  REQUIRE(std::vector<float>(x, x + 4) == d.f32);
}

TEST_CASE("BatchLoader rejects bad normalization, batch sizes and empty datasets", "[datasets]") {
  Dataset d;
  d.name = "rgb";
  d.sample_shape = Shape{3, 2, 2};
  d.dtype = SampleDtype::u8;
  d.num_classes = 2;
  d.u8.assign(12, 0);
  d.labels = {0};
  Normalization two_means;
  two_means.mean = {0.f, 0.f};
  REQUIRE_THROWS_WITH(BatchLoader(d, 1, false, false, two_means, 0),
                      Catch::Contains("mean has 2 values; expected 1 or 3") && Catch::Contains("(3, 2, 2)"));
  Normalization zero_std;
  zero_std.std = {1.f, 0.f, 1.f};
  REQUIRE_THROWS_WITH(BatchLoader(d, 1, false, false, zero_std, 0),
                      Catch::Contains("std must be finite and > 0"));
  Normalization bad_scale;
  bad_scale.scale = std::numeric_limits<float>::infinity();
  REQUIRE_THROWS_AS(BatchLoader(d, 1, false, false, bad_scale, 0), DataError);
  REQUIRE_THROWS_WITH(BatchLoader(d, 0, false, false, {}, 0), Catch::Contains("batch size must be >= 1"));
  Dataset empty = d;
  empty.u8.clear();
  empty.labels.clear();
  REQUIRE_THROWS_WITH(BatchLoader(empty, 1, false, false, {}, 0), Catch::Contains("has no samples"));
}

TEST_CASE("BatchLoader rethrows an error from the worker in next() instead of terminating", "[datasets]") {
  Dataset d = indexed(10);
  d.f32[5] = std::numeric_limits<float>::quiet_NaN();
  BatchLoader loader(d, 2, false, false, {}, 0);
  for (int round = 0; round < 2; ++round) {  // start_epoch clears the error; it recurs at batch 2
    loader.start_epoch(round);
    const float* x = nullptr;
    const int32_t* y = nullptr;
    int64_t rows = 0;
    REQUIRE(loader.next(&x, &y, &rows));
    REQUIRE(loader.next(&x, &y, &rows));
    REQUIRE_THROWS_AS(loader.next(&x, &y, &rows), DataError);
    REQUIRE_THROWS_WITH(loader.next(&x, &y, &rows), Catch::Contains("sample 5, element 0 is nan"));
  }
}

TEST_CASE("BatchLoader keeps returning false after the epoch and needs start_epoch first", "[datasets]") {
  const Dataset d = indexed(3);
  BatchLoader loader(d, 2, true, false, {}, 0);
  const float* x = nullptr;
  const int32_t* y = nullptr;
  int64_t rows = 0;
  REQUIRE_THROWS_AS(loader.next(&x, &y, &rows), InternalError);
  loader.start_epoch(0);
  REQUIRE(loader.next(&x, &y, &rows));
  REQUIRE(loader.next(&x, &y, &rows));
  REQUIRE_FALSE(loader.next(&x, &y, &rows));
  REQUIRE_FALSE(loader.next(&x, &y, &rows));
}

TEST_CASE("BatchLoader restarts cleanly mid-epoch and shuts down mid-epoch", "[datasets]") {
  const Dataset d = indexed(1000);
  const float* x = nullptr;
  const int32_t* y = nullptr;
  int64_t rows = 0;
  {
    BatchLoader loader(d, 16, true, false, {}, 3);
    loader.start_epoch(0);
    REQUIRE(loader.next(&x, &y, &rows));
    std::vector<int64_t> order = epoch_order(loader, 1);  // abandons epoch 0
    std::sort(order.begin(), order.end());
    REQUIRE(order == iota_vector(1000));
    loader.start_epoch(2);
    REQUIRE(loader.next(&x, &y, &rows));
  }  // destroyed with the worker mid-epoch
  { BatchLoader never_started(d, 16, true, false, {}, 3); }
  SUCCEED("no hang, no crash");
}

TEST_CASE("BatchLoader never overwrites the batch the caller holds (stress)", "[datasets]") {
  const Dataset d = indexed(257);
  BatchLoader loader(d, 4, true, false, {}, 8);
  int64_t seen = 0;
  bool intact = true;
  for (int64_t epoch = 0; epoch < 40; ++epoch) {
    loader.start_epoch(epoch);
    const float* x = nullptr;
    const int32_t* y = nullptr;
    int64_t rows = 0;
    while (loader.next(&x, &y, &rows)) {
      const std::vector<float> copy(x, x + rows);
      volatile double work = 0;  // give the worker time to fill the other buffer
      for (int i = 0; i < 2000; ++i) work = work + std::sqrt(double(i));
      intact = intact && std::equal(copy.begin(), copy.end(), x);
      for (int64_t r = 0; r < rows; ++r) intact = intact && y[r] == static_cast<int64_t>(x[r]) % 7;
      seen += rows;
    }
  }
  REQUIRE(intact);
  REQUIRE(seen == 40 * 257);
}

TEST_CASE("shards partition every batch in rank order, sizes within one row, empty ones allowed",
          "[datasets][shard]") {
  for (int64_t rows : {0, 1, 2, 3, 7, 100, 101, 1023})
    for (int ranks : {1, 2, 3, 4, 8}) {
      INFO("rows " << rows << ", ranks " << ranks);
      int64_t next = 0, smallest = rows, largest = 0;
      for (int r = 0; r < ranks; ++r) {
        const Shard s = shard_of(rows, r, ranks);
        REQUIRE(s.begin == next);
        REQUIRE(s.rows >= 0);
        next += s.rows;
        smallest = std::min(smallest, s.rows);
        largest = std::max(largest, s.rows);
        REQUIRE(s.rows <= max_shard_rows(rows, ranks));
      }
      REQUIRE(next == rows);
      REQUIRE(largest - smallest <= 1);
    }
  // A batch smaller than the world: 3 rows over 4 ranks leave one rank empty.
  int empty = 0;
  for (int r = 0; r < 4; ++r) empty += shard_of(3, r, 4).rows == 0;
  REQUIRE(empty == 1);
  // The executor's plans: every non-empty shard size of the full (100) and tail (7) batches.
  REQUIRE(shard_batch_sizes({100, 7}, 4) == std::vector<int64_t>{1, 2, 25});
  REQUIRE(shard_batch_sizes({3}, 4) == std::vector<int64_t>{1});
  REQUIRE(shard_batch_sizes({100, 7}, 1) == std::vector<int64_t>{7, 100});
}

TEST_CASE(
    "sharded loaders together yield each batch of the single loader, in order, uneven and empty shards "
    "included",
    "[datasets][shard]") {
  // 23 samples, batches of 5 (tail 3), shuffled: over 2 ranks the shards are 2|3 and 1|2; over 4
  // ranks the tail's 3 rows leave one rank empty.
  const Dataset d = indexed(23);
  for (int ranks : {2, 4}) {
    INFO(ranks << " ranks");
    BatchLoader whole(d, 5, true, false, {}, 9);
    std::vector<std::unique_ptr<BatchLoader>> shards;
    for (int r = 0; r < ranks; ++r)
      shards.push_back(std::make_unique<BatchLoader>(d, 5, true, false, Normalization{}, 9, r, ranks));
    for (int64_t epoch : {0, 3}) {
      whole.start_epoch(epoch);
      for (auto& s : shards) {
        REQUIRE(s->batches_per_epoch() == whole.batches_per_epoch());
        s->start_epoch(epoch);
      }
      const float* x;
      const int32_t* y;
      int64_t n, global;
      int empty = 0;
      while (whole.next(&x, &y, &n)) {
        std::vector<float> expect(x, x + n), got;
        for (auto& s : shards) {
          REQUIRE(s->next(&x, &y, &n, &global));
          REQUIRE(global == int64_t(expect.size()));
          empty += n == 0;
          for (int64_t r = 0; r < n; ++r) {
            REQUIRE(y[r] == int32_t(int64_t(x[r]) % 7));
            got.push_back(x[r]);
          }
        }
        REQUIRE(got == expect);
      }
      for (auto& s : shards) REQUIRE_FALSE(s->next(&x, &y, &n));
      REQUIRE(empty == (ranks == 4 ? 1 : 0));
    }
  }
}

TEST_CASE("BatchLoader fills large batches on several threads with the same values and errors",
          "[datasets]") {
  // 150 samples of (4, 32, 32): a batch of 64 is 2^18 values, the size from which threads share it.
  Dataset d;
  d.name = "wide";
  d.sample_shape = Shape{4, 32, 32};
  d.dtype = SampleDtype::u8;
  d.num_classes = 5;
  const int64_t n = 150, numel = d.sample_shape.numel();
  for (int64_t i = 0; i < n * numel; ++i) d.u8.push_back(static_cast<uint8_t>((i * 7 + i / numel) % 251));
  for (int64_t i = 0; i < n; ++i) d.labels.push_back(static_cast<int32_t>(i % 5));
  Normalization norm;
  norm.scale = 1.f / 255;
  norm.mean = {0.1f, 0.2f, 0.3f, 0.4f};
  norm.std = {0.5f, 0.6f, 0.7f, 0.8f};
  auto batches = [&](int threads) {
    BatchLoader loader(d, 64, true, false, norm, 11, 0, 1, threads);
    std::vector<float> xs;
    std::vector<int32_t> ys;
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      loader.start_epoch(epoch);
      const float* x = nullptr;
      const int32_t* y = nullptr;
      int64_t rows = 0;
      while (loader.next(&x, &y, &rows)) {
        xs.insert(xs.end(), x, x + rows * numel);
        ys.insert(ys.end(), y, y + rows);
      }
    }
    return std::make_pair(xs, ys);
  };
  const auto one = batches(1);
  REQUIRE(one.first.size() == size_t(2 * n * numel));
  REQUIRE(batches(3) == one);  // bit for bit, labels too
  REQUIRE(default_loader_threads(usable_cores()) >= 1);
  REQUIRE(default_loader_threads(usable_cores()) <= 8);

  // Non-finite values in two rows of one batch: the error names the first of them in batch order.
  Dataset f;
  f.name = "floats";
  f.sample_shape = Shape{4, 32, 32};
  f.dtype = SampleDtype::f32;
  f.num_classes = 2;
  f.f32.assign(size_t(n * numel), 0.5f);
  f.labels.assign(size_t(n), 0);
  f.f32[size_t(40 * numel + 17)] = std::numeric_limits<float>::infinity();
  f.f32[size_t(50 * numel + 3)] = std::numeric_limits<float>::quiet_NaN();
  BatchLoader bad(f, 64, false, false, {}, 0, 0, 1, 4);
  bad.start_epoch(0);
  const float* x = nullptr;
  const int32_t* y = nullptr;
  int64_t rows = 0;
  REQUIRE_THROWS_WITH(bad.next(&x, &y, &rows), Catch::Contains("sample 40, element 17 is inf"));
}

TEST_CASE("random_resized_crop draws torchvision's boxes from (seed, epoch, position)", "[loader][augment]") {
  RandomResizedCrop c;
  c.out_h = c.out_w = 4;
  int fallbacks = 0;
  for (int64_t pos = 0; pos < 500; ++pos) {
    const CropBox b = draw_crop(c, 40, 60, 7, 3, pos);
    const CropBox again = draw_crop(c, 40, 60, 7, 3, pos);
    REQUIRE(
        (b.top == again.top && b.left == again.left && b.crop_h == again.crop_h && b.crop_w == again.crop_w));
    REQUIRE(b.crop_h >= 1);
    REQUIRE(b.crop_w >= 1);
    REQUIRE(b.top + b.crop_h <= 40);
    REQUIRE(b.left + b.crop_w <= 60);
    const double frac = double(b.crop_h * b.crop_w) / 2400.0, ratio = double(b.crop_w) / double(b.crop_h);
    if (frac < 0.07 || frac > 1.0 || ratio < 0.7 || ratio > 1.4) ++fallbacks;  // rounding aside, in range
  }
  REQUIRE(fallbacks == 0);
  // another epoch or position draws another box (almost surely)
  const CropBox a = draw_crop(c, 40, 60, 7, 3, 0), e = draw_crop(c, 40, 60, 7, 4, 0);
  REQUIRE_FALSE((a.top == e.top && a.left == e.left && a.crop_h == e.crop_h && a.crop_w == e.crop_w));
  // an impossible ratio falls back to the centre crop at the nearest allowed ratio
  RandomResizedCrop wide = c;
  wide.scale_lo = wide.scale_hi = 1.0;
  wide.ratio_lo = wide.ratio_hi = 4.0;
  const CropBox f = draw_crop(wide, 40, 60, 1, 0, 0);
  REQUIRE(f.crop_w == 60);
  REQUIRE(f.crop_h == 15);
  REQUIRE(f.top == 12);
}

TEST_CASE("random_resized_crop resizes the box bilinearly and normalizes it", "[loader][augment]") {
  Dataset d;
  d.name = "grad";
  d.sample_shape = Shape{1, 8, 8};
  d.dtype = SampleDtype::u8;
  for (int i = 0; i < 2; ++i)
    for (int y = 0; y < 8; ++y)
      for (int x = 0; x < 8; ++x) d.u8.push_back(uint8_t(i == 0 ? 10 * x : 77));  // a ramp, then a constant
  d.labels = {0, 1};
  RandomResizedCrop whole;  // the whole image, resized 8 -> 4: x' = (x + 0.5) * 2 - 0.5 = 2x + 0.5
  whole.out_h = whole.out_w = 4;
  whole.scale_lo = whole.scale_hi = 1.0;
  whole.ratio_lo = whole.ratio_hi = 1.0;
  Normalization n;
  n.scale = 0.5f;
  BatchLoader loader(d, 2, false, false, n, 1, 0, 1, 1, whole);
  loader.start_epoch(0);
  const float* x;
  const int32_t* y;
  int64_t rows;
  REQUIRE(loader.next(&x, &y, &rows));
  REQUIRE(rows == 2);
  for (int yy = 0; yy < 4; ++yy)
    for (int xx = 0; xx < 4; ++xx) {
      REQUIRE(x[yy * 4 + xx] == Approx(0.5 * 10 * (2 * xx + 0.5)));  // the ramp at 2x + 0.5, scaled
      REQUIRE(x[16 + yy * 4 + xx] == Approx(0.5 * 77));              // a constant stays constant
    }
  // random boxes: every value stays inside the image's range
  RandomResizedCrop any;
  any.out_h = any.out_w = 5;
  BatchLoader random(d, 2, true, false, Normalization{}, 3, 0, 1, 1, any);
  for (int64_t epoch = 0; epoch < 20; ++epoch) {
    random.start_epoch(epoch);
    REQUIRE(random.next(&x, &y, &rows));
    for (int i = 0; i < 50; ++i) {
      REQUIRE(x[i] >= 0.f);
      REQUIRE(x[i] <= 77.f);
    }
  }
}

// The crop's fast path (each source row blended once, shared by the output rows that read it)
// against the formula value by value, bit for bit: random boxes of 3-channel images, bytes and
// floats, shrunk and enlarged (a 20 x 17 image to 6 x 9 and to 31 x 28).
TEST_CASE("random_resized_crop equals the per-value bilinear formula bit for bit", "[loader][augment]") {
  for (bool bytes : {true, false})
    for (auto [oh, ow] : {std::pair<int64_t, int64_t>{6, 9}, {31, 28}}) {
      INFO((bytes ? "u8" : "f32") << " images to " << oh << " x " << ow);
      const int64_t C = 3, H = 20, W = 17, n = 4;
      Dataset d;
      d.name = "crops";
      d.sample_shape = Shape{C, H, W};
      d.dtype = bytes ? SampleDtype::u8 : SampleDtype::f32;
      uint64_t state = 7;
      for (int64_t i = 0; i < n * C * H * W; ++i) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        if (bytes)
          d.u8.push_back(uint8_t(state >> 56));
        else
          d.f32.push_back(float(int64_t(state >> 40) % 1000) / 7.f);
      }
      d.labels = {0, 1, 0, 1};
      RandomResizedCrop c;
      c.out_h = oh;
      c.out_w = ow;
      Normalization norm;
      norm.scale = 0.25f;
      norm.mean = {0.5f, 1.f, -2.f};
      norm.std = {2.f, 0.5f, 4.f};
      BatchLoader loader(d, n, false, false, norm, 11, 0, 1, 1, c);
      for (int64_t epoch = 0; epoch < 5; ++epoch) {
        loader.start_epoch(epoch);
        const float* x;
        const int32_t* y;
        int64_t rows;
        REQUIRE(loader.next(&x, &y, &rows));
        for (int64_t s = 0; s < n; ++s) {
          const CropBox b = draw_crop(c, H, W, 11, epoch, s);
          const double sy = double(b.crop_h) / double(oh), sx = double(b.crop_w) / double(ow);
          for (int64_t ch = 0; ch < C; ++ch) {
            const float m = norm.scale / norm.std[size_t(ch)],
                        a = -norm.mean[size_t(ch)] / norm.std[size_t(ch)];
            const auto at = [&](int64_t yy, int64_t xx) {
              const size_t k = size_t(((s * C + ch) * H + b.top + yy) * W + b.left + xx);
              return bytes ? float(d.u8[k]) : d.f32[k];
            };
            for (int64_t yy = 0; yy < oh; ++yy) {
              const double fy = std::min(std::max((double(yy) + 0.5) * sy - 0.5, 0.0), double(b.crop_h - 1));
              const int64_t y0 = int64_t(fy), y1 = std::min(y0 + 1, b.crop_h - 1);
              const float wy = float(fy - double(y0));
              for (int64_t xx = 0; xx < ow; ++xx) {
                const double fx =
                    std::min(std::max((double(xx) + 0.5) * sx - 0.5, 0.0), double(b.crop_w - 1));
                const int64_t x0 = int64_t(fx), x1 = std::min(x0 + 1, b.crop_w - 1);
                const float wx = float(fx - double(x0));
                const float top = at(y0, x0) + (at(y0, x1) - at(y0, x0)) * wx;
                const float bottom = at(y1, x0) + (at(y1, x1) - at(y1, x0)) * wx;
                const float want = (top + (bottom - top) * wy) * m + a;
                REQUIRE(x[((s * C + ch) * oh + yy) * ow + xx] == want);
              }
            }
          }
        }
      }
    }
}
