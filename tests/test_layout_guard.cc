// Layouts compared by shape, not by element count: a channels-last (N, H, W, C) array is refused
// for a channels-first input_shape, with the fix named (layout: nhwc on an npy source transposes on
// load; predict names the numpy call); a channels-last input_shape gets the channels-first form.
#include <catch2/catch.hpp>

#include "datasets/npy_reader.h"
#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/data/data_sources.h"
#include "lib/train/session.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;

namespace {

// n channels-last images (n, h, w, c): pixel (i, y, x, k) = 100 * y + 10 * x + k + i (as uint8).
std::vector<uint8_t> nhwc_pixels(int64_t n, int64_t h, int64_t w, int64_t c) {
  std::vector<uint8_t> px;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        for (int64_t k = 0; k < c; ++k) px.push_back(uint8_t(100 * y + 10 * x + k + i));
  return px;
}

const char* kModel =
    "model:\n  input_shape: [3, 2, 2]\n  layers: [{type: flatten}, {type: dense, units: 2}]\n";

}  // namespace

TEST_CASE(
    "an npy array of channels-last images is refused for a channels-first input_shape, naming "
    "layout: nhwc, which transposes it on load",
    "[layout][datasets]") {
  const std::string dir = test::temp_dir("nhwc");
  const std::vector<uint8_t> px = nhwc_pixels(4, 2, 2, 3);
  write_npy_u8(dir + "/x.npy", {4, 2, 2, 3}, px.data());
  const std::vector<int64_t> labels{0, 1, 0, 1};
  write_npy_i64(dir + "/y.npy", {4}, labels.data());
  const std::string source = "data:\n  train: {format: npy, x: " + dir + "/x.npy, y: " + dir + "/y.npy";
  const Config as_stored = parse_config(std::string(kModel) + source + "}\n  num_classes: 2\n", "l.yaml", {});
  // 12 values per sample either way: the old check compared counts and let this through.
  CHECK_THROWS_WITH(load_run_data(as_stored, true),
                    Contains("data.train: samples have shape (2, 2, 3) but model.input_shape is (3, 2, 2)") &&
                        Contains("look channels-last") && Contains("add layout: nhwc to data.train"));
  CHECK_THROWS_AS(load_run_data(as_stored, true), DataError);

  const Config nhwc =
      parse_config(std::string(kModel) + source + ", layout: nhwc}\n  num_classes: 2\n", "l.yaml", {});
  const RunData r = load_run_data(nhwc, true);
  REQUIRE(r.train.sample_shape == Shape{3, 2, 2});
  REQUIRE(r.train.dtype == SampleDtype::u8);
  // Sample 1, channel k, row y, column x is at ((1 * 3 + k) * 2 + y) * 2 + x.
  for (int64_t k = 0; k < 3; ++k)
    for (int64_t y = 0; y < 2; ++y)
      for (int64_t x = 0; x < 2; ++x)
        CHECK(int(r.train.u8[size_t(((3 + k) * 2 + y) * 2 + x)]) == 100 * y + 10 * x + k + 1);

  // layout: nhwc needs 4-D images.
  const std::vector<float> flat(8, 0.f);
  write_npy_f32(dir + "/flat.npy", {4, 2}, flat.data());
  const Config flat_nhwc =
      parse_config(std::string(kModel) + "data:\n  train: {format: npy, x: " + dir + "/flat.npy, y: " + dir +
                       "/y.npy, layout: nhwc}\n  num_classes: 2\n",
                   "l.yaml", {});
  CHECK_THROWS_WITH(load_run_data(flat_nhwc, true), Contains("layout: nhwc takes channels-last images"));
  CHECK_THROWS_WITH(
      parse_config(std::string(kModel) + source + ", layout: hwc}\n  num_classes: 2\n", "l.yaml", {}),
      Contains("allowed: nchw, nhwc"));
}

TEST_CASE("sample shapes that only add or drop axes of 1, or are flat, still fit the input_shape",
          "[layout][datasets]") {
  CHECK(sample_shape_mismatch(Shape{28, 28}, Shape{1, 28, 28}, "fix").empty());
  CHECK(sample_shape_mismatch(Shape{784}, Shape{1, 28, 28}, "fix").empty());
  CHECK(sample_shape_mismatch(Shape{1, 28, 28}, Shape{784}, "fix").empty());
  CHECK(sample_shape_mismatch(Shape{1, 28, 28}, Shape{1, 784}, "fix").empty());
  CHECK(sample_shape_mismatch(Shape{3, 32, 32}, Shape{3, 32, 32}, "fix").empty());
  CHECK_THAT(sample_shape_mismatch(Shape{3, 32, 32}, Shape{3, 16, 16}, "fix"),
             Contains("samples have shape (3, 32, 32) but model.input_shape is (3, 16, 16)"));
  CHECK_THAT(sample_shape_mismatch(Shape{32, 32, 3}, Shape{3, 32, 32}, "fix it"),
             Contains("(the same number of values, in another layout): they look channels-last") &&
                 Contains("; fix it"));
  // The last axis is the channel count, the first is not, yet no transposition gives the input:
  // refused as channels-last, without a fix that would not fit.
  CHECK_THAT(sample_shape_mismatch(Shape{2, 6, 4}, Shape{4, 6, 2}, "fix it"),
             Contains("look channels-last") && !Contains("fix it"));
  // Same count and rank, not a transposition: refused, without a claim about channels.
  const std::string other = sample_shape_mismatch(Shape{2, 6, 4}, Shape{6, 4, 2}, "fix");
  CHECK_THAT(other, Contains("in another layout"));
  CHECK_THAT(other, !Contains("channels"));
}

TEST_CASE("a channels-last input_shape is answered with its channels-first form", "[layout][config]") {
  // IDX-like (1, 8, 8) images for input_shape [8, 8, 1]: same count, same rank, another layout.
  CHECK_THAT(sample_shape_mismatch(Shape{1, 8, 8}, Shape{8, 8, 1}, "fix"),
             Contains("model.input_shape [8, 8, 1] looks channels-last (height, width, channels); trainer's "
                      "images are channels-first: input_shape: [1, 8, 8]"));
  CHECK(channels_first_hint(Shape{1, 28, 28}).empty());
  CHECK(channels_first_hint(Shape{784}).empty());
  CHECK_THAT(channels_first_hint(Shape{32, 32, 3}), Contains("input_shape: [3, 32, 32]"));
  // A shape error of the model itself says so too.
  const Config c = parse_config(R"(model:
  input_shape: [28, 28, 1]
  layers: [{type: conv2d, filters: 4, kernel_size: 3}, {type: flatten}, {type: dense, units: 10}]
data: {train: {format: random}, num_classes: 10}
)",
                                "cl.yaml", {});
  CHECK_THROWS_WITH(make_model(c), Contains("model.input_shape [28, 28, 1] looks channels-last") &&
                                       Contains("input_shape: [1, 28, 28]"));
  auto summary = test::run_trainer("summary " + test::write_file(test::temp_dir("cl"), "cl.yaml", R"(model:
  input_shape: [28, 28, 1]
  layers: [{type: conv2d, filters: 4, kernel_size: 3}, {type: flatten}, {type: dense, units: 10}]
data: {train: {format: random}, num_classes: 10}
)"));
  CHECK(summary.exit_code == 3);
  CHECK_THAT(summary.err, Contains("input_shape: [1, 28, 28]"));
}

TEST_CASE("predict refuses a channels-last .npy for a channels-first model, naming the transpose",
          "[layout][cli]") {
  const std::string dir = test::temp_dir("predict_nhwc");
  const std::string cfg = test::write_file(dir, "m.yaml",
                                           std::string(kModel) +
                                               "data: {train: {format: random, samples: 8}, num_classes: 2, "
                                               "batch_size: 4}\ntrain: {epochs: 1}\n");
  REQUIRE(test::run_trainer("fit " + cfg + " --out " + dir + "/run -q").exit_code == 0);
  const std::vector<uint8_t> px = nhwc_pixels(2, 2, 2, 3);
  write_npy_u8(dir + "/x.npy", {2, 2, 2, 3}, px.data());
  auto p = test::run_trainer("predict " + dir + "/run --input " + dir + "/x.npy --output " + dir + "/p.csv");
  CHECK(p.exit_code == 4);
  CHECK_THAT(p.err, Contains("samples have shape (2, 2, 3) but model.input_shape is (3, 2, 2)") &&
                        Contains("np.transpose(x, (0, 3, 1, 2))"));
  // The same pixels transposed are accepted.
  std::vector<int64_t> shape{2, 2, 2, 3};
  std::vector<uint8_t> nchw = px;
  nhwc_to_nchw(nchw, shape);
  write_npy_u8(dir + "/x_nchw.npy", shape, nchw.data());
  auto ok =
      test::run_trainer("predict " + dir + "/run --input " + dir + "/x_nchw.npy --output " + dir + "/q.csv");
  INFO(ok.err);
  CHECK(ok.exit_code == 0);
}
