// data.augment: random crop (zero padding in pixel space) and horizontal flip of training batches
// (lib/core/augment_formula.h, kernels/cpu/augment_cpu.cc). Checked against a reference written
// here from torchvision's definition (pad, take the window at (dy, dx), mirror), for determinism,
// for the spread of the draws, and through the config and fit.
#include <catch2/catch.hpp>
#include <set>
#include <sstream>

#include "datasets/batch_loader.h"
#include "datasets/npy_reader.h"
#include "kernels/cpu/cpu_ops.h"
#include "lib/config/config.h"
#include "lib/train/fit.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;

namespace {

AugmentSpec spec(int64_t c, int64_t h, int64_t w, int32_t pad, bool flip) {
  AugmentSpec s;
  s.channels = c;
  s.height = h;
  s.width = w;
  s.crop_padding = pad;
  s.flip = flip;
  for (int64_t k = 0; k < c; ++k) s.fill[k] = -100.f - float(k);  // distinct from every pixel value
  return s;
}

std::vector<float> run(const AugmentSpec& s, const std::vector<float>& in, int64_t batch, uint64_t seed,
                       uint64_t step) {
  std::vector<float> out(in.size(), 0.f);
  StepScalars sc;
  sc.seed = seed;
  sc.step = step;
  cpu::augment(s, in.data(), out.data(), batch, sc);
  return out;
}

std::vector<float> ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(i);
  return v;
}

}  // namespace

TEST_CASE("augment equals pad, crop at the drawn offset, then mirror", "[augment]") {
  const int64_t B = 64, C = 2, H = 5, W = 7;
  const int32_t P = 2;
  const AugmentSpec s = spec(C, H, W, P, true);
  const std::vector<float> in = ramp(size_t(B * C * H * W));
  const std::vector<float> out = run(s, in, B, 11, 3);
  int flipped = 0;
  for (int64_t n = 0; n < B; ++n) {
    const AugmentDraw d = augment_draw(s, 11, 3, n);
    REQUIRE(d.dy >= 0);
    REQUIRE(d.dy <= 2 * P);
    REQUIRE(d.dx >= 0);
    REQUIRE(d.dx <= 2 * P);
    flipped += d.flip;
    for (int64_t c = 0; c < C; ++c) {
      // The reference: the padded image (H + 2P, W + 2P), its (H, W) window at (dy, dx), mirrored.
      std::vector<float> padded(size_t((H + 2 * P) * (W + 2 * P)), s.fill[c]);
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j)
          padded[size_t((i + P) * (W + 2 * P) + j + P)] = in[size_t(((n * C + c) * H + i) * W + j)];
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j) {
          const int64_t cj = d.flip ? W - 1 - j : j;  // the flip acts on the cropped window
          const float want = padded[size_t((i + d.dy) * (W + 2 * P) + cj + d.dx)];
          INFO("sample " << n << " channel " << c << " pixel (" << i << ", " << j << ") dy " << d.dy << " dx "
                         << d.dx << " flip " << d.flip);
          REQUIRE(out[size_t(((n * C + c) * H + i) * W + j)] == want);
        }
    }
  }
  CHECK(flipped > 0);
  CHECK(flipped < B);
}

TEST_CASE("augment is a function of (seed, step, sample): repeatable, and new at another step or seed",
          "[augment]") {
  const AugmentSpec s = spec(3, 8, 8, 4, true);
  const int64_t B = 16;
  const std::vector<float> in = ramp(size_t(B * 3 * 8 * 8));
  const auto a = run(s, in, B, 5, 100);
  CHECK(run(s, in, B, 5, 100) == a);
  CHECK(run(s, in, B, 5, 101) != a);
  CHECK(run(s, in, B, 6, 100) != a);
  // Sample n's draw does not depend on the batch around it (resume and other batch sizes agree).
  const auto first8 = run(s, std::vector<float>(in.begin(), in.begin() + 8 * 3 * 64), 8, 5, 100);
  CHECK(std::equal(first8.begin(), first8.end(), a.begin()));
  // Off: crop_padding 0 and no flip copies.
  CHECK(run(spec(3, 8, 8, 0, false), in, B, 5, 100) == in);
}

TEST_CASE("augment's offsets cover [0, 2P] evenly and about half the samples are flipped", "[augment]") {
  const AugmentSpec s = spec(1, 32, 32, 4, true);
  std::vector<int> dy(9, 0), dx(9, 0);
  int flips = 0;
  const int n = 18000;
  for (int64_t k = 0; k < n; ++k) {
    const AugmentDraw d = augment_draw(s, 1, uint64_t(k / 128), k % 128);
    ++dy[size_t(d.dy)];
    ++dx[size_t(d.dx)];
    flips += d.flip;
  }
  for (int v = 0; v <= 8; ++v) {
    INFO("offset " << v);
    CHECK(dy[size_t(v)] == Approx(n / 9.0).epsilon(0.08));
    CHECK(dx[size_t(v)] == Approx(n / 9.0).epsilon(0.08));
  }
  CHECK(flips == Approx(n / 2.0).epsilon(0.03));
}

TEST_CASE("data.augment: validated keys, image inputs only, and fit runs with it", "[augment][config]") {
  const std::string base = R"(model:
  input_shape: [1, 8, 8]
  layers: [{type: conv2d, filters: 4, kernel_size: 3}, {type: relu}, {type: flatten}, {type: dense, units: 2}]
loss: {type: cross_entropy}
optimizer: {type: sgd, lr: 0.05}
data: {train: {format: random, samples: 64, seed: 2}, num_classes: 2, batch_size: 16, validation_split: 0.25,
       augment: {crop_padding: 2, flip: horizontal}}
train: {epochs: 2, seed: 3}
device: cpu
)";
  const std::string path = test::write_file(test::temp_dir("augment_cfg"), "a.yaml", base);
  Config cfg = load_config(path, {});
  CHECK(cfg.data.augment.crop_padding == 2);
  CHECK(cfg.data.augment.flip);
  FitOptions fo;
  fo.out_dir = "";
  std::ostringstream out;
  const FitResult r = fit(cfg, fo, out);
  CHECK(r.epochs_run == 2);

  CHECK_THROWS_WITH(load_config(path, {"data.augment.flip=vertical"}),
                    Contains("data.augment.flip") && Contains("allowed: none, horizontal"));
  CHECK_THROWS_WITH(load_config(path, {"data.augment.crop_padding=-2"}),
                    Contains("data.augment.crop_padding"));
  CHECK_THROWS_WITH(load_config(path, {"data.augment.zoom=2"}), Contains("data.augment") && Contains("zoom"));
  CHECK_THROWS_WITH(load_config(path, {"model.input_shape=[64]", "model.layers=[{type: dense, units: 2}]"}),
                    Contains("needs image inputs"));
}

TEST_CASE("augment pads with what the loader makes of a 0 byte, per channel", "[augment]") {
  Dataset d;
  d.name = "zeros";
  d.sample_shape = Shape({3, 2, 2});
  d.u8.assign(12, 0);
  d.labels = {0};
  Normalization norm;
  norm.scale = 1.f / 255.f;
  norm.mean = {0.4914f, 0.4822f, 0.4465f};
  norm.std = {0.2470f, 0.2435f, 0.2616f};
  BatchLoader loader(d, 1, false, false, norm, 1);
  loader.start_epoch(0);
  const float* x = nullptr;
  const int32_t* y = nullptr;
  int64_t rows = 0;
  REQUIRE(loader.next(&x, &y, &rows));
  const std::vector<float> zero = normalized_zero(norm, d.sample_shape);
  REQUIRE(zero.size() == 3);
  for (int c = 0; c < 3; ++c)
    for (int k = 0; k < 4; ++k) CHECK(x[c * 4 + k] == zero[size_t(c)]);  // bit for bit
  // One value serves every channel; a list of another length is refused, as the loader refuses it.
  norm.mean = {0.5f};
  norm.std = {0.25f};
  CHECK(normalized_zero(norm, d.sample_shape) == std::vector<float>(3, -2.f));
  norm.mean = {0.1f, 0.2f};
  CHECK_THROWS_WITH(normalized_zero(norm, d.sample_shape), Contains("normalization mean has 2 values"));
}

TEST_CASE("fit trains with random_resized_crop from images larger than the input, repeatably",
          "[augment][fit]") {
  const std::string dir = test::temp_dir("rrc");
  // 48 training images of 3 x 12 x 12 (cropped at random to 8 x 8), 16 validation ones of 3 x 8 x 8
  const auto images = [&](const std::string& name, int64_t n, int64_t side, uint64_t seed) {
    const std::vector<float> x = test::random_vector(size_t(n * 3 * side * side), seed, 0.f, 1.f);
    std::vector<int64_t> y;
    for (int64_t i = 0; i < n; ++i) y.push_back(i % 3);
    write_npy_f32(dir + "/" + name + "_x.npy", {n, 3, side, side}, x.data());
    write_npy_i64(dir + "/" + name + "_y.npy", {n}, y.data());
  };
  images("train", 48, 12, 1);
  images("val", 16, 8, 2);
  const std::string yaml =
      "model: {input_shape: [3, 8, 8], layers: [{type: conv2d, filters: 4, kernel_size: 3}, {type: relu}, "
      "{type: flatten}, {type: dense, units: 3}]}\nloss: cross_entropy\noptimizer: {type: adam, lr: 0.01}\n"
      "data: {train: {format: npy, x: " +
      dir + "/train_x.npy, y: " + dir +
      "/train_y.npy}, "
      "VALIDATION"
      "num_classes: 3, batch_size: 16, augment: {random_resized_crop: {scale: [0.3, 1.0]}, flip: "
      "horizontal}}\n"
      "train: {epochs: 2, seed: 4}\n";
  const auto with = [&](const std::string& validation) {
    std::string y = yaml;
    y.replace(y.find("VALIDATION"), 10, validation);
    return y;
  };
  const std::string val = "validation: {format: npy, x: " + dir + "/val_x.npy, y: " + dir + "/val_y.npy}, ";
  auto run = [&](const std::vector<std::string>& sets) {
    std::ostringstream out;
    return fit(parse_config(with(val), "rrc.yaml", sets), FitOptions{}, out);
  };
  const FitResult a = run({}), b = run({}), c = run({"train.seed=5"});
  REQUIRE(a.final_train_loss == b.final_train_loss);  // the crops are a function of the seed
  REQUIRE(a.final_train_loss != c.final_train_loss);
  REQUIRE(std::isfinite(a.final_val_loss));
  // without the crop the 12 x 12 training images do not fit the input
  std::ostringstream out;
  REQUIRE_THROWS_WITH(
      fit(parse_config(with(val), "rrc.yaml", {"data.augment.random_resized_crop=false"}), FitOptions{}, out),
      Catch::Contains("(3, 12, 12)"));
  // and a validation split would validate on the wrong size
  REQUIRE_THROWS_WITH(fit(parse_config(with("validation_split: 0.25, "), "rrc.yaml", {}), FitOptions{}, out),
                      Catch::Contains("data.validation_split would validate on images of the wrong size"));
  REQUIRE_THROWS_WITH(
      parse_config(with(val), "rrc.yaml", {"data.augment.random_resized_crop={scale: [0.9, 0.1]}"}),
      Catch::Contains("data.augment.random_resized_crop.scale"));
}
