// split_validation: sizes, the three modes (stratified, shuffled, Keras' last rows), the rounding
// rule, float targets, determinism in the seed, and the class-coverage warning.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>

#include "datasets/split.h"
#include "lib/core/error.h"

using namespace trainer;

namespace {

// n samples of shape (2), sample i = {i, 100 + i}, label label_of(i); u8 or f32.
template <typename LabelOf>
Dataset numbered(int64_t n, SampleDtype dtype, int classes, LabelOf label_of) {
  Dataset d;
  d.name = "numbered";
  d.sample_shape = Shape{2};
  d.dtype = dtype;
  d.num_classes = classes;
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == SampleDtype::u8) {
      d.u8.push_back(static_cast<uint8_t>(i));
      d.u8.push_back(static_cast<uint8_t>(100 + i));
    } else {
      d.f32.push_back(static_cast<float>(i));
      d.f32.push_back(static_cast<float>(100 + i));
    }
    d.labels.push_back(static_cast<int32_t>(label_of(i)));
  }
  return d;
}

Dataset numbered(int64_t n, SampleDtype dtype) {
  return numbered(n, dtype, 3, [](int64_t i) { return i % 3; });
}

// Rows sorted by class, as a walk over class folders gives them: `per_class` samples of each.
Dataset sorted_by_class(int classes, int64_t per_class) {
  return numbered(classes * per_class, SampleDtype::f32, classes, [=](int64_t i) { return i / per_class; });
}

SplitOptions keras(double f) {
  SplitOptions o;
  o.fraction = f;
  o.shuffle = false;
  o.stratify = false;
  return o;
}

SplitOptions stratified(double f, uint64_t seed = 0) {
  SplitOptions o;
  o.fraction = f;
  o.seed = seed;
  return o;
}

std::map<int32_t, int64_t> class_counts(const Dataset& d) {
  std::map<int32_t, int64_t> m;
  for (int32_t y : d.labels) ++m[y];
  return m;
}

// The sample ids (the first feature) of a f32 dataset.
std::vector<float> ids(const Dataset& d) {
  std::vector<float> out;
  for (size_t i = 0; i < d.f32.size(); i += 2) out.push_back(d.f32[i]);
  return out;
}

}  // namespace

TEST_CASE("split_validation with shuffle false takes the last fraction as validation, sized like Keras",
          "[datasets][split]") {
  const auto r = split_validation(numbered(10, SampleDtype::f32), keras(0.2));
  REQUIRE(r.train.size() == 8);
  REQUIRE(r.validation.size() == 2);
  REQUIRE(r.validation.f32 == std::vector<float>{8, 108, 9, 109});
  REQUIRE(r.validation.labels == std::vector<int32_t>{2, 0});
  REQUIRE(r.train.f32.front() == 0.f);
  REQUIRE(r.train.f32.back() == 107.f);
  REQUIRE(r.train.sample_shape == Shape{2});
  REQUIRE(r.validation.num_classes == 3);
  REQUIRE(r.validation.dtype == SampleDtype::f32);
  // Keras: split_at = int(10 * (1 - 0.25)) = int(7.5) = 7
  REQUIRE(split_validation(numbered(10, SampleDtype::f32), keras(0.25)).train.size() == 7);
}

TEST_CASE("split_validation copies uint8 samples", "[datasets][split]") {
  const auto r = split_validation(numbered(4, SampleDtype::u8), keras(0.5));
  REQUIRE(r.train.u8 == std::vector<uint8_t>{0, 100, 1, 101});
  REQUIRE(r.validation.u8 == std::vector<uint8_t>{2, 102, 3, 103});
  REQUIRE(r.validation.f32.empty());
}

TEST_CASE("split_validation rejects fractions outside (0, 1) and splits leaving a side empty",
          "[datasets][split]") {
  const Dataset d = numbered(3, SampleDtype::f32);
  for (const SplitOptions& base : {keras(0.5), stratified(0.5)}) {
    SplitOptions o = base;
    o.fraction = 0.0;
    REQUIRE_THROWS_WITH(split_validation(d, o), Catch::Contains("strictly between 0 and 1, got 0"));
    o.fraction = 1.0;
    REQUIRE_THROWS_WITH(split_validation(d, o), Catch::Contains("strictly between 0 and 1"));
    o.fraction = 0.9;
    REQUIRE_THROWS_WITH(split_validation(d, o), Catch::Contains("leaves no training samples"));
    o.fraction = 1e-18;
    REQUIRE_THROWS_WITH(split_validation(d, o), Catch::Contains("leaves no validation samples"));
    o.fraction = 0.5;
    REQUIRE_THROWS_AS(split_validation(numbered(1, SampleDtype::f32), o), DataError);
  }
}

TEST_CASE("the default split of rows sorted by class gives validation every class in its share",
          "[datasets][split]") {
  // The case: 10 classes of 50 rows in folder order. The last 20% holds classes 8 and 9 only.
  const Dataset d = sorted_by_class(10, 50);
  const auto last_rows = split_validation(d, keras(0.2));
  REQUIRE(class_counts(last_rows.validation) == std::map<int32_t, int64_t>{{8, 50}, {9, 50}});
  REQUIRE_THAT(class_coverage_warning(last_rows.train, last_rows.validation, {}),
               Catch::Contains("2 classes in the validation data have no training samples: 8, 9"));

  const auto r = split_validation(d, stratified(0.2, 7));
  REQUIRE(r.validation.size() == 100);
  REQUIRE(r.train.size() == 400);
  for (const auto& [label, count] : class_counts(r.validation)) REQUIRE(count == 10);
  REQUIRE(class_counts(r.validation).size() == 10);
  REQUIRE(class_coverage_warning(r.train, r.validation, {}).empty());
  // Every sample lands on exactly one side, and each side keeps the file's order.
  std::vector<float> all = ids(r.train), v = ids(r.validation);
  REQUIRE(std::is_sorted(all.begin(), all.end()));
  REQUIRE(std::is_sorted(v.begin(), v.end()));
  all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  for (size_t i = 0; i < all.size(); ++i) REQUIRE(all[i] == float(i));
}

TEST_CASE("the stratified split's sizes: Keras' total, per-class floors and largest remainders",
          "[datasets][split]") {
  // 3 classes of 7, 5 and 3 samples; f = 0.3: V = 15 - int(15 * 0.7) = 15 - 10 = 5.
  // n_c * V / n = 35/15, 25/15, 15/15 = 2.33, 1.67, 1: floors 2, 1, 1 (4); the one left goes to
  // class 1, whose remainder (10) is the largest.
  const Dataset d = numbered(15, SampleDtype::f32, 3, [](int64_t i) { return i < 7 ? 0 : i < 12 ? 1 : 2; });
  const auto r = split_validation(d, stratified(0.3, 1));
  REQUIRE(r.validation.size() == 5);
  REQUIRE(class_counts(r.validation) == std::map<int32_t, int64_t>{{0, 2}, {1, 2}, {2, 1}});

  SECTION("the total is Keras' for every mode, over a grid of sizes and fractions") {
    for (int64_t n : {7, 10, 33, 100, 101, 999}) {
      for (double f : {0.05, 0.1, 0.2, 0.25, 0.3, 0.5, 0.75}) {
        const int64_t split_at = int64_t(double(n) * (1.0 - f));
        if (split_at <= 0 || split_at >= n) continue;
        const Dataset g = numbered(n, SampleDtype::f32, 4, [](int64_t i) { return (i * i) % 4; });
        SplitOptions shuffled = stratified(f, 3);
        shuffled.stratify = false;
        for (const SplitOptions& o : {keras(f), shuffled, stratified(f, 3)}) {
          const auto s = split_validation(g, o);
          REQUIRE(s.validation.size() == n - split_at);
          REQUIRE(s.train.size() == split_at);
        }
        // Each class's share is within one sample of n_c * f.
        const auto s = split_validation(g, stratified(f, 3));
        const auto all = class_counts(g), val = class_counts(s.validation);
        for (const auto& [label, n_c] : all) {
          const double exact = double(n_c) * double(n - split_at) / double(n);
          const auto it = val.find(label);
          REQUIRE(std::abs(double(it == val.end() ? 0 : it->second) - exact) < 1.0 + 1e-9);
        }
      }
    }
  }
}

TEST_CASE("a class's last training sample goes to validation only when no other class can take it",
          "[datasets][split]") {
  // Classes 0 (9 samples) and 1 (1 sample), f = 0.5: V = 5; floors 4 and 0, remainders 5 and 5.
  // Class 1 would lose its only training sample: the extra one goes to class 0.
  const Dataset d = numbered(10, SampleDtype::f32, 2, [](int64_t i) { return i == 3 ? 1 : 0; });
  const auto r = split_validation(d, stratified(0.5));
  REQUIRE(class_counts(r.validation) == std::map<int32_t, int64_t>{{0, 5}});
  REQUIRE(class_counts(r.train) == std::map<int32_t, int64_t>{{0, 4}, {1, 1}});
  REQUIRE(class_coverage_warning(r.train, r.validation, {"cat", "dog"}) ==
          "1 class in the training data has no validation samples: 1 (dog) (the validation metrics say "
          "nothing about it)");
}

TEST_CASE("the shuffled split is a function of the seed", "[datasets][split]") {
  const Dataset d = sorted_by_class(4, 25);
  for (bool stratify : {true, false}) {
    SplitOptions o = stratified(0.2, 11);
    o.stratify = stratify;
    const auto a = split_validation(d, o), b = split_validation(d, o);
    REQUIRE(ids(a.validation) == ids(b.validation));
    REQUIRE(a.validation.labels == b.validation.labels);
    o.seed = 12;
    REQUIRE(ids(split_validation(d, o).validation) != ids(a.validation));
    // Not the last rows.
    REQUIRE(ids(a.validation) != ids(split_validation(d, keras(0.2)).validation));
  }
}

TEST_CASE("float targets: binary 0/1 values are stratified by value, others are only shuffled",
          "[datasets][split]") {
  Dataset d;
  d.name = "binary";
  d.sample_shape = Shape{1};
  d.dtype = SampleDtype::f32;
  d.target_width = 1;
  for (int i = 0; i < 40; ++i) {
    d.f32.push_back(float(i));
    d.targets.push_back(i < 30 ? 0.f : 1.f);  // 30 negatives, then 10 positives
  }
  const auto r = split_validation(d, stratified(0.25, 5));
  REQUIRE(r.note.empty());
  REQUIRE(r.validation.size() == 10);
  REQUIRE(r.validation.labels.empty());
  // V = 10: 30 * 10/40 = 7.5 and 10 * 10/40 = 2.5; the tie in remainders goes to the lower value, 0.
  REQUIRE(std::count(r.validation.targets.begin(), r.validation.targets.end(), 1.f) == 2);
  REQUIRE(std::count(r.train.targets.begin(), r.train.targets.end(), 1.f) == 8);
  for (size_t i = 0; i < r.validation.f32.size(); ++i)  // the targets travel with their samples
    REQUIRE(r.validation.targets[i] == (r.validation.f32[i] >= 30.f ? 1.f : 0.f));
  REQUIRE(split_validation(d, keras(0.25)).validation.targets == std::vector<float>(10, 1.f));
  const auto last = split_validation(d, keras(0.25));
  REQUIRE_THAT(class_coverage_warning(last.train, last.validation, {}),
               Catch::Contains("1 class in the training data has no validation samples: 0"));

  SECTION("regression values") {
    d.targets[0] = 0.5f;
    const auto s = split_validation(d, stratified(0.25, 5));
    REQUIRE_THAT(s.note, Catch::Contains("stratify does not apply"));
    REQUIRE(s.validation.size() == 10);
    REQUIRE(class_coverage_warning(s.train, s.validation, {}).empty());
  }
  SECTION("two values per sample (multi-label)") {
    d.target_width = 2;
    d.sample_shape = Shape{2};
    const auto s = split_validation(d, stratified(0.25, 5));
    REQUIRE_THAT(s.note, Catch::Contains("2 float target(s) per sample"));
    REQUIRE(s.validation.size() == 5);
    REQUIRE(s.validation.targets.size() == 10);
  }
}
