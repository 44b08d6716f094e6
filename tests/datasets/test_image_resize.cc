// resize_image against Pillow 9.4's Image.resize(BILINEAR) (the values torchvision's
// Resize(antialias=True) gives a PIL image), against hand-computed triangle-filter means, and
// the properties any resize must have; torchvision's shorter-side and center-crop arithmetic.
#include <catch2/catch.hpp>

#include "datasets/image_resize.h"
#include "lib/core/error.h"

using namespace trainer;

namespace {

// The pattern the Pillow references were computed on: byte i is (37 i + 11) mod 256.
Image pattern(int64_t h, int64_t w, int64_t c) {
  Image im{h, w, c, std::vector<uint8_t>(size_t(h * w * c))};
  for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = uint8_t((i * 37 + 11) % 256);
  return im;
}

Image row(std::vector<uint8_t> values) {
  const int64_t w = int64_t(values.size());
  return Image{1, w, 1, std::move(values)};
}

}  // namespace

TEST_CASE("resize_image matches Pillow's bilinear resample bit for bit", "[datasets][images]") {
  // python3: Image.frombytes(mode, (w, h), pattern).resize((ow, oh), Image.BILINEAR).tobytes()
  struct Case {
    int64_t h, w, c, oh, ow;
    std::vector<uint8_t> expected;
  };
  const std::vector<Case> cases{
      {4, 6, 1, 2, 3, {91, 84, 146, 179, 95, 92}},
      {5, 7, 3, 3, 4, {73, 98,  135, 174, 78,  115, 143, 180, 84,  123, 160, 185,
                       84, 112, 149, 158, 92,  129, 157, 164, 98,  137, 171, 95,
                       89, 126, 163, 69,  106, 143, 171, 75,  112, 151, 176, 79}},
      {2, 3, 1, 5, 4, {11,  34,  62,  85,  22,  45,  73,  96,  67,  90,
                       118, 141, 111, 134, 162, 185, 122, 145, 173, 196}},
      {3, 10, 1, 3, 4, {48, 131, 163, 63, 162, 142, 82, 165, 101, 103, 186, 93}},
  };
  for (const Case& k : cases) {
    INFO(k.h << "x" << k.w << "x" << k.c << " -> " << k.oh << "x" << k.ow);
    const Image out = resize_image(pattern(k.h, k.w, k.c), k.oh, k.ow);
    REQUIRE(out.height == k.oh);
    REQUIRE(out.width == k.ow);
    REQUIRE(out.channels == k.c);
    REQUIRE(out.pixels == k.expected);
  }
}

TEST_CASE("resize_image averages under a triangle widened by the downscale factor (hand-computed)",
          "[datasets][images]") {
  // 2 -> 1: centre 1.0, support 2; weights tri(-0.25) = tri(0.25) = 0.75: the mean, 50.
  REQUIRE(resize_image(row({0, 100}), 1, 1).pixels == std::vector<uint8_t>{50});
  // 4 -> 2, first output: centre 1.0, inputs 0..2 with weights 0.75, 0.75, 0.25 (sum 1.75):
  // (0 * 0.75 + 40 * 0.75 + 80 * 0.25) / 1.75 = 28.57 -> 29; second (centre 3.0) mirrors it:
  // (40 * 0.25 + 80 * 0.75 + 120 * 0.75) / 1.75 = 91.43 -> 91.
  REQUIRE(resize_image(row({0, 40, 80, 120}), 1, 2).pixels == std::vector<uint8_t>{29, 91});
  // Upscaling 2 -> 4 keeps support 1: outputs at 0.25, 0.75, 1.25, 1.75 in input pixel units;
  // the outer ones see only one neighbour (edge clamp) and stay 0 and 100.
  REQUIRE(resize_image(row({0, 100}), 1, 4).pixels == std::vector<uint8_t>{0, 25, 75, 100});
}

TEST_CASE("resize_image: same size is the identity and a constant image stays constant",
          "[datasets][images]") {
  const Image p = pattern(9, 7, 3);
  REQUIRE(resize_image(p, 9, 7).pixels == p.pixels);
  for (int64_t oh : {1, 3, 9, 20})
    for (int64_t ow : {1, 5, 7, 31}) {
      INFO(oh << "x" << ow);
      Image flat{9, 7, 3, std::vector<uint8_t>(9 * 7 * 3, 173)};
      const Image out = resize_image(flat, oh, ow);
      REQUIRE(out.pixels == std::vector<uint8_t>(size_t(oh * ow * 3), 173));
    }
  // Resizing only one dimension leaves the other's pixels untouched: a vertical-only resize of
  // an image whose rows are constant keeps every row constant.
  Image rows{4, 5, 1, {}};
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 5; ++x) rows.pixels.push_back(uint8_t(60 * y));
  const Image tall = resize_image(rows, 2, 5);
  for (int y = 0; y < 2; ++y)
    for (int x = 1; x < 5; ++x) REQUIRE(tall.pixels[size_t(y * 5 + x)] == tall.pixels[size_t(y * 5)]);
}

TEST_CASE("shorter_side_size and center_crop follow torchvision's Resize(S) and CenterCrop",
          "[datasets][images]") {
  // Resize(256) of 375x500 (h x w): 256 x int(256 * 500 / 375) = 256 x 341.
  REQUIRE(shorter_side_size(375, 500, 256) == std::make_pair<int64_t, int64_t>(256, 341));
  REQUIRE(shorter_side_size(500, 375, 256) == std::make_pair<int64_t, int64_t>(341, 256));
  REQUIRE(shorter_side_size(28, 28, 32) == std::make_pair<int64_t, int64_t>(32, 32));
  // Offsets round((in - out) / 2) half to even, as Python's round.
  REQUIRE(center_crop_offset(5, 2) == 2);  // 1.5 -> 2
  REQUIRE(center_crop_offset(3, 2) == 0);  // 0.5 -> 0
  REQUIRE(center_crop_offset(7, 2) == 2);  // 2.5 -> 2
  REQUIRE(center_crop_offset(8, 4) == 2);
  const Image p = pattern(5, 6, 1);
  const Image c = center_crop(p, 2, 3);
  REQUIRE(c.height == 2);
  REQUIRE(c.width == 3);
  // top = round(1.5) = 2, left = round(1.5) = 2
  REQUIRE(c.pixels == std::vector<uint8_t>{p.pixels[2 * 6 + 2], p.pixels[2 * 6 + 3], p.pixels[2 * 6 + 4],
                                           p.pixels[3 * 6 + 2], p.pixels[3 * 6 + 3], p.pixels[3 * 6 + 4]});
  REQUIRE_THROWS_AS(center_crop(p, 6, 1), InternalError);
}
