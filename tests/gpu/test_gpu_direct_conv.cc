// Our convolution kernels (kernels/cuda/direct_conv.cuh) against a float64 reference on the
// host, every direction and every tiling CudnnConv may time and pick, on shapes that reach each
// branch: 1 input channel, filter counts that are not a multiple of 4 or of the tile, more
// filters than one tile, filters longer than one 16-row chunk, strides, symmetric and asymmetric
// padding, a 1-row (conv1d) input, pixel counts that do not divide into tiles or splits. The
// executor's tests take cuDNN's deterministic algorithms, so these are the kernels' correctness
// tests; CudnnConv uses them only where they time faster. Each direction also through a fused
// relu: relu(conv + bias) stored, dy read through the stored output's mask. Same-size 3x3
// convolutions also through the 3x3 correlation (forward and backward-data).
#include <string>
#include <vector>

#include "kernels/cuda/direct_conv.cuh"
#include "tests/gpu/gpu_test_util.h"

namespace trainer::gpu_test {
namespace {

using cuda::DirectConv;
using cuda::DirectConvGeometry;

struct Reference {
  std::vector<double> y, dx, dw, db;
};

// y = conv(x, W) + b; dx, dW, db for the output gradient dy (NCHW, cross-correlation).
Reference reference(const DirectConvGeometry& g, const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<float>& b, const std::vector<float>& dy) {
  Reference r;
  r.y.assign(size_t(g.n * g.k * g.oh * g.ow), 0.0);
  r.dx.assign(x.size(), 0.0);
  r.dw.assign(w.size(), 0.0);
  r.db.assign(size_t(g.k), 0.0);
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t k = 0; k < g.k; ++k)
      for (int64_t p = 0; p < g.oh; ++p)
        for (int64_t q = 0; q < g.ow; ++q) {
          const size_t yi = size_t(((n * g.k + k) * g.oh + p) * g.ow + q);
          double acc = b[size_t(k)];
          const double d = dy[yi];
          r.db[size_t(k)] += d;
          for (int64_t c = 0; c < g.c; ++c)
            for (int64_t i = 0; i < g.r; ++i)
              for (int64_t j = 0; j < g.s; ++j) {
                const int64_t yy = p * g.sh + i - g.pad_top, xx = q * g.sw + j - g.pad_left;
                if (yy < 0 || yy >= g.h || xx < 0 || xx >= g.w) continue;
                const size_t xi = size_t(((n * g.c + c) * g.h + yy) * g.w + xx);
                const size_t wi = size_t(((k * g.c + c) * g.r + i) * g.s + j);
                acc += double(x[xi]) * w[wi];
                r.dx[xi] += d * w[wi];
                r.dw[wi] += d * x[xi];
              }
          r.y[yi] = acc;
        }
  return r;
}

double rel(const std::vector<float>& a, const std::vector<double>& ref) {
  REQUIRE(a.size() == ref.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    REQUIRE(std::isfinite(a[i]));
    diff += (a[i] - ref[i]) * (a[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

DirectConvGeometry geometry(int64_t n, int64_t c, int64_t h, int64_t w, int64_t k, int64_t r, int64_t s,
                            int64_t stride, int64_t pt, int64_t pb, int64_t pl, int64_t pr) {
  DirectConvGeometry g;
  g.n = n;
  g.c = c;
  g.h = h;
  g.w = w;
  g.k = k;
  g.r = r;
  g.s = s;
  g.sh = g.sw = stride;
  g.pad_top = pt;
  g.pad_left = pl;
  g.oh = (h + pt + pb - r) / stride + 1;
  g.ow = (w + pl + pr - s) / stride + 1;
  return g;
}

}  // namespace

TEST_CASE("gpu direct convolutions equal a float64 reference in every direction", "[gpu][conv]") {
  CudaBackend& be = cuda_backend();
  const std::vector<std::pair<const char*, DirectConvGeometry>> cases = {
      {"mnist conv1: 1 channel, 10 filters 5x5", geometry(7, 1, 28, 28, 10, 5, 5, 1, 0, 0, 0, 0)},
      {"mnist conv2: 10 -> 20, 5x5", geometry(5, 10, 12, 12, 20, 5, 5, 1, 0, 0, 0, 0)},
      {"same padding 3x3, 6 filters", geometry(3, 3, 9, 11, 6, 3, 3, 1, 1, 1, 1, 1)},
      {"asymmetric padding (TF same, even kernel)", geometry(4, 2, 8, 7, 5, 4, 2, 1, 1, 2, 0, 1)},
      {"stride 2 (backward-data goes to cuDNN)", geometry(3, 4, 13, 10, 8, 3, 3, 2, 1, 1, 1, 1)},
      {"conv1d as one row", geometry(6, 7, 1, 40, 9, 1, 5, 1, 0, 0, 0, 0)},
      {"many samples a block", geometry(600, 2, 6, 6, 3, 3, 3, 1, 0, 0, 0, 0)},
      {"cifar conv3: 64 -> 64 3x3 on 6x6", geometry(9, 64, 6, 6, 64, 3, 3, 1, 0, 0, 0, 0)},
      {"70 filters: two channel tiles", geometry(3, 5, 7, 9, 70, 3, 3, 1, 1, 1, 1, 1)},
      // The 3x3 correlation (stride 1, padding 1; grids of a block an SM at least): channel
      // counts past one staged group of 8 and not a multiple of it, filter counts not a multiple
      // of the thread's group, rows not a multiple of the thread's rows, 7 x 7 and 28 x 28 maps.
      {"3x3 same, 28 x 28, 16 -> 20 filters", geometry(40, 16, 28, 28, 20, 3, 3, 1, 1, 1, 1, 1)},
      {"3x3 same, 7 x 7, 13 -> 24 filters", geometry(400, 13, 7, 7, 24, 3, 3, 1, 1, 1, 1, 1)},
  };
  uint64_t seed = 11;
  for (const auto& [name, g] : cases) {
    DYNAMIC_SECTION(name) {
      DirectConv conv(g, be.device());
      REQUIRE(conv.forward_fits());
      REQUIRE(conv.backward_filter_fits());
      CHECK(conv.backward_data_fits() == (g.sh == 1 && g.sw == 1));
      const size_t xn = size_t(g.n * g.c * g.h * g.w), wn = size_t(g.k * g.c * g.r * g.s),
                   yn = size_t(g.n * g.k * g.oh * g.ow);
      const auto x = random_vector(xn, ++seed), w = random_vector(wn, ++seed),
                 b = random_vector(size_t(g.k), ++seed), dy = random_vector(yn, ++seed);
      const Reference ref = reference(g, x, w, b, dy);
      // A fused relu: z = relu(y) stored, and the backward reads dy where z > 0 (z: the
      // reference's y, rounded; its mask applied to dy for the masked reference).
      std::vector<float> z(ref.y.begin(), ref.y.end()), dy_masked = dy;
      std::vector<double> y_relu = ref.y;
      for (size_t i = 0; i < z.size(); ++i) {
        if (!(z[i] > 0.f)) dy_masked[i] = 0.f;
        if (!(y_relu[i] > 0.0)) y_relu[i] = 0.0;
      }
      const Reference masked = reference(g, x, w, b, dy_masked);
      std::vector<double> unbiased = ref.y;
      for (size_t i = 0; i < unbiased.size(); ++i) unbiased[i] -= b[size_t(int64_t(i) / (g.oh * g.ow) % g.k)];
      Buffer dx_(be, xn * 4), x_(be, xn * 4), w_(be, wn * 4), dw_(be, wn * 4), b_(be, size_t(g.k) * 4),
          db_(be, size_t(g.k) * 4), y_(be, yn * 4), dy_(be, yn * 4), z_(be, yn * 4),
          scratch(be, conv.max_scratch_bytes());
      z_.upload(z);
      x_.upload(x);
      w_.upload(w);
      b_.upload(b);
      dy_.upload(dy);
      // Poisoned outputs: every element must be written.
      const float nan = std::nanf("");
      for (int t = 0; t < conv.tilings(DirectConv::kForward); ++t) {
        conv.select(DirectConv::kForward, t);
        INFO("forward, " << conv.describe(DirectConv::kForward, t));
        y_.fill(nan, yn);
        conv.forward(x_.as(), w_.as(), b_.as(), y_.as(), scratch.get(), be.stream());
        be.synchronize();
        CHECK(rel(y_.download(yn), ref.y) < 1e-5);
        // Without a bias: the forward adds none.
        y_.fill(nan, yn);
        conv.forward(x_.as(), w_.as(), nullptr, y_.as(), scratch.get(), be.stream());
        be.synchronize();
        CHECK(rel(y_.download(yn), unbiased) < 1e-5);
        // Through a fused relu.
        y_.fill(nan, yn);
        conv.forward(x_.as(), w_.as(), b_.as(), y_.as(), scratch.get(), be.stream(), true);
        be.synchronize();
        CHECK(rel(y_.download(yn), y_relu) < 1e-5);
      }
      for (int t = 0; t < conv.tilings(DirectConv::kBackwardData); ++t) {
        conv.select(DirectConv::kBackwardData, t);
        INFO("backward-data, " << conv.describe(DirectConv::kBackwardData, t));
        dx_.fill(nan, xn);
        conv.backward_data(dy_.as(), w_.as(), dx_.as(), scratch.get(), be.stream());
        be.synchronize();
        CHECK(rel(dx_.download(xn), ref.dx) < 1e-5);
        dx_.fill(nan, xn);
        conv.backward_data(dy_.as(), w_.as(), dx_.as(), scratch.get(), be.stream(), z_.as());
        be.synchronize();
        CHECK(rel(dx_.download(xn), masked.dx) < 1e-5);
      }
      for (int t = 0; t < conv.tilings(DirectConv::kBackwardFilter); ++t) {
        conv.select(DirectConv::kBackwardFilter, t);
        INFO("backward-filter, " << conv.describe(DirectConv::kBackwardFilter, t));
        REQUIRE(conv.scratch_bytes(DirectConv::kBackwardFilter) <= conv.max_scratch_bytes());
        dw_.fill(nan, wn);
        db_.fill(nan, size_t(g.k));
        conv.backward_filter(x_.as(), dy_.as(), dw_.as(), db_.as(), scratch.get(), be.stream());
        be.synchronize();
        CHECK(rel(dw_.download(wn), ref.dw) < 1e-5);
        CHECK(rel(db_.download(size_t(g.k)), ref.db) < 1e-5);
        // Without a bias: the filter gradient leaves db alone.
        db_.fill(7.f, size_t(g.k));
        conv.backward_filter(x_.as(), dy_.as(), dw_.as(), nullptr, scratch.get(), be.stream());
        be.synchronize();
        CHECK(db_.download(size_t(g.k)) == std::vector<float>(size_t(g.k), 7.f));
        CHECK(rel(dw_.download(wn), ref.dw) < 1e-5);
        // Through a fused relu's mask.
        conv.backward_filter(x_.as(), dy_.as(), dw_.as(), db_.as(), scratch.get(), be.stream(), z_.as());
        be.synchronize();
        CHECK(rel(dw_.download(wn), masked.dw) < 1e-5);
        CHECK(rel(db_.download(size_t(g.k)), masked.db) < 1e-5);
      }
      INFO("tilings: forward " << conv.tilings(DirectConv::kForward) << ", backward-data "
                               << conv.tilings(DirectConv::kBackwardData) << ", backward-filter "
                               << conv.tilings(DirectConv::kBackwardFilter));
      CHECK(conv.tilings(DirectConv::kForward) >= 2);
      CHECK(conv.tilings(DirectConv::kBackwardFilter) >= 2);
      if (std::string(name).rfind("3x3 same", 0) == 0) {  // the correlation is among the tilings
        bool forward = false, backward = false;
        for (int t = 0; t < conv.tilings(DirectConv::kForward); ++t)
          forward = forward || conv.describe(DirectConv::kForward, t).rfind("3x3", 0) == 0;
        for (int t = 0; t < conv.tilings(DirectConv::kBackwardData); ++t)
          backward = backward || conv.describe(DirectConv::kBackwardData, t).rfind("3x3", 0) == 0;
        CHECK(forward);
        CHECK(backward);
      }
    }
  }
}

TEST_CASE("gpu direct convolution declines what does not fit in shared memory", "[gpu][conv]") {
  // VGG's 256-channel 32x32 layer: 2,304 values a filter, over the gather table's 1,024.
  const DirectConv conv(geometry(8, 256, 32, 32, 256, 3, 3, 1, 1, 1, 1, 1), cuda_backend().device());
  CHECK_FALSE(conv.forward_fits());
  CHECK_FALSE(conv.backward_data_fits());
  CHECK_FALSE(conv.backward_filter_fits());
  CHECK(conv.max_scratch_bytes() == 0);
}

}  // namespace trainer::gpu_test
