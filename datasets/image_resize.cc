// Pillow's src/libImaging/Resample.c (precompute_coeffs, normalize_coeffs_8bpc,
// ImagingResampleHorizontal_8bpc / Vertical_8bpc) for the bilinear filter, on HWC bytes.
#include "datasets/image_resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "lib/core/error.h"

namespace trainer {
namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;  // Pillow's PRECISION_BITS for 8-bit images

double triangle(double x) {
  x = std::fabs(x);
  return x < 1.0 ? 1.0 - x : 0.0;
}

// For each output position: the first input index, how many inputs, and their fixed-point weights
// (ksize per output, zero-padded).
struct Coefficients {
  int64_t ksize = 0;
  std::vector<int64_t> first, count;
  std::vector<int32_t> weights;
};

Coefficients precompute(int64_t in_size, int64_t out_size) {
  const double scale = double(in_size) / double(out_size);
  const double filter_scale = std::max(scale, 1.0);
  const double support = 1.0 * filter_scale;  // the triangle's support is 1
  Coefficients c;
  c.ksize = int64_t(std::ceil(support)) * 2 + 1;
  c.first.resize(size_t(out_size));
  c.count.resize(size_t(out_size));
  c.weights.assign(size_t(out_size * c.ksize), 0);
  std::vector<double> k(size_t(c.ksize));
  for (int64_t xx = 0; xx < out_size; ++xx) {
    const double center = (double(xx) + 0.5) * scale;
    const double ss = 1.0 / filter_scale;
    // int() truncates toward zero, as Pillow's (int) casts do, before the clamps.
    const int64_t xmin = std::max<int64_t>(int64_t(center - support + 0.5), 0);
    const int64_t xmax = std::min<int64_t>(int64_t(center + support + 0.5), in_size) - xmin;
    double ww = 0.0;
    for (int64_t x = 0; x < xmax; ++x) {
      k[size_t(x)] = triangle((double(x + xmin) - center + 0.5) * ss);
      ww += k[size_t(x)];
    }
    for (int64_t x = 0; x < xmax; ++x) {
      const double w = ww != 0.0 ? k[size_t(x)] / ww : k[size_t(x)];
      const double f = w * double(1 << kPrecisionBits);
      c.weights[size_t(xx * c.ksize + x)] = int32_t(w < 0 ? std::trunc(-0.5 + f) : std::trunc(0.5 + f));
    }
    c.first[size_t(xx)] = xmin;
    c.count[size_t(xx)] = xmax;
  }
  return c;
}

inline uint8_t clip8(int64_t v) {
  if (v >= (int64_t(1) << kPrecisionBits << 8)) return 255;
  if (v <= 0) return 0;
  return uint8_t(v >> kPrecisionBits);
}

// (h, w, ch) -> (h, out_w, ch)
Image resize_horizontal(const Image& in, int64_t out_w) {
  const Coefficients c = precompute(in.width, out_w);
  Image out{in.height, out_w, in.channels, std::vector<uint8_t>(size_t(in.height * out_w * in.channels))};
  const int64_t ch = in.channels;
  for (int64_t y = 0; y < in.height; ++y) {
    const uint8_t* row = in.pixels.data() + y * in.width * ch;
    uint8_t* dst = out.pixels.data() + y * out_w * ch;
    for (int64_t xx = 0; xx < out_w; ++xx) {
      const int32_t* k = c.weights.data() + xx * c.ksize;
      const uint8_t* src = row + c.first[size_t(xx)] * ch;
      for (int64_t b = 0; b < ch; ++b) {
        int64_t ss = int64_t(1) << (kPrecisionBits - 1);
        for (int64_t x = 0; x < c.count[size_t(xx)]; ++x) ss += int64_t(src[x * ch + b]) * k[x];
        dst[xx * ch + b] = clip8(ss);
      }
    }
  }
  return out;
}

// (h, w, ch) -> (out_h, w, ch)
Image resize_vertical(const Image& in, int64_t out_h) {
  const Coefficients c = precompute(in.height, out_h);
  const int64_t row = in.width * in.channels;
  Image out{out_h, in.width, in.channels, std::vector<uint8_t>(size_t(out_h * row))};
  for (int64_t yy = 0; yy < out_h; ++yy) {
    const int32_t* k = c.weights.data() + yy * c.ksize;
    const uint8_t* src = in.pixels.data() + c.first[size_t(yy)] * row;
    uint8_t* dst = out.pixels.data() + yy * row;
    for (int64_t i = 0; i < row; ++i) {
      int64_t ss = int64_t(1) << (kPrecisionBits - 1);
      for (int64_t y = 0; y < c.count[size_t(yy)]; ++y) ss += int64_t(src[y * row + i]) * k[y];
      dst[i] = clip8(ss);
    }
  }
  return out;
}

}  // namespace

Image resize_image(const Image& in, int64_t out_h, int64_t out_w) {
  if (out_h < 1 || out_w < 1 || in.height < 1 || in.width < 1)
    throw InternalError("resize_image: sizes must be positive");
  if (out_w == in.width && out_h == in.height) return in;
  if (out_h == in.height) return resize_horizontal(in, out_w);
  if (out_w == in.width) return resize_vertical(in, out_h);
  return resize_vertical(resize_horizontal(in, out_w), out_h);
}

std::pair<int64_t, int64_t> shorter_side_size(int64_t height, int64_t width, int64_t shorter) {
  // Exact integer division equals Python's int(S * long / short) for any size below 2^26.
  if (height <= width) return {shorter, std::max<int64_t>(1, shorter * width / height)};
  return {std::max<int64_t>(1, shorter * height / width), shorter};
}

int64_t center_crop_offset(int64_t in, int64_t out) {
  return int64_t(std::nearbyint(double(in - out) / 2.0));  // the default rounding: half to even
}

Image center_crop(const Image& in, int64_t out_h, int64_t out_w) {
  if (out_h > in.height || out_w > in.width || out_h < 1 || out_w < 1)
    throw InternalError("center_crop: the window must fit in the image");
  if (out_h == in.height && out_w == in.width) return in;
  const int64_t top = center_crop_offset(in.height, out_h), left = center_crop_offset(in.width, out_w);
  const int64_t ch = in.channels;
  Image out{out_h, out_w, ch, std::vector<uint8_t>(size_t(out_h * out_w * ch))};
  for (int64_t y = 0; y < out_h; ++y)
    std::copy_n(in.pixels.data() + ((top + y) * in.width + left) * ch, out_w * ch,
                out.pixels.data() + y * out_w * ch);
  return out;
}

}  // namespace trainer
