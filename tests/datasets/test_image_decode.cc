// decode_image: every PNG color type and bit depth, JPEG baseline / progressive / gray / CMYK,
// the channel conversions, and the message for each kind of bad file. The files are made here
// with libpng and libjpeg (tests/datasets/image_writers.h).
#include <catch2/catch.hpp>
#include <cstdlib>

#include "datasets/image_decode.h"
#include "lib/core/error.h"
#include "tests/datasets/image_writers.h"
#include "tests/datasets/temp_files.h"

using namespace trainer;
using namespace trainer::dataset_tests;
using Catch::Contains;

namespace {

Image decode(const std::vector<uint8_t>& bytes, int channels, int64_t max_pixels = default_max_image_pixels) {
  return decode_image(bytes.data(), bytes.size(), "x.img", channels, max_pixels);
}

PngSpec png(int w, int h, int color_type, int depth, std::vector<uint16_t> samples) {
  PngSpec s;
  s.width = w;
  s.height = h;
  s.color_type = color_type;
  s.bit_depth = depth;
  s.samples = std::move(samples);
  return s;
}

double mean_abs_diff(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  REQUIRE(a.size() == b.size());
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += std::abs(int(a[i]) - int(b[i]));
  return s / double(a.size());
}

// The PNG chunk at `type`'s first occurrence: its data offset.
size_t chunk_data(const std::vector<uint8_t>& png_bytes, const char* type) {
  for (size_t at = 8; at + 8 <= png_bytes.size();) {
    const uint32_t len = uint32_t(png_bytes[at]) << 24 | uint32_t(png_bytes[at + 1]) << 16 |
                         uint32_t(png_bytes[at + 2]) << 8 | png_bytes[at + 3];
    if (std::memcmp(&png_bytes[at + 4], type, 4) == 0) return at + 8;
    at += 12 + len;
  }
  FAIL("no chunk " << type);
  return 0;
}

void put_be32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + size_t(i)] = uint8_t(v >> (24 - 8 * i));
}

}  // namespace

TEST_CASE("decode_image reads 8-bit gray and RGB PNGs exactly and converts channels as Pillow does",
          "[datasets][images]") {
  const std::vector<uint8_t> gray{0, 17, 128, 255, 3, 99};
  Image g = decode(encode_png8(3, 2, 1, gray), 1);
  REQUIRE(g.height == 2);
  REQUIRE(g.width == 3);
  REQUIRE(g.channels == 1);
  REQUIRE(g.pixels == gray);
  // Gray to RGB repeats the value.
  Image g3 = decode(encode_png8(3, 2, 1, gray), 3);
  REQUIRE(g3.channels == 3);
  REQUIRE(std::vector<uint8_t>(g3.pixels.begin(), g3.pixels.begin() + 6) ==
          std::vector<uint8_t>{0, 0, 0, 17, 17, 17});
  // RGB to gray: Pillow's convert("L") gives 124 and 91 for these two pixels.
  const std::vector<uint8_t> rgb{10, 200, 30, 255, 0, 128};
  REQUIRE(decode(encode_png8(2, 1, 3, rgb), 3).pixels == rgb);
  REQUIRE(decode(encode_png8(2, 1, 3, rgb), 1).pixels == std::vector<uint8_t>{124, 91});
}

TEST_CASE("decode_image drops the alpha of RGBA and gray+alpha PNGs", "[datasets][images]") {
  REQUIRE(decode(encode_png(png(2, 1, PNG_COLOR_TYPE_RGB_ALPHA, 8, {1, 2, 3, 0, 4, 5, 6, 255})), 3).pixels ==
          std::vector<uint8_t>{1, 2, 3, 4, 5, 6});
  REQUIRE(decode(encode_png(png(2, 1, PNG_COLOR_TYPE_GRAY_ALPHA, 8, {7, 0, 9, 128})), 1).pixels ==
          std::vector<uint8_t>{7, 9});
}

TEST_CASE("decode_image expands palette PNGs (with transparency) to their colors", "[datasets][images]") {
  PngSpec s = png(3, 1, PNG_COLOR_TYPE_PALETTE, 8, {2, 0, 1});
  s.palette = {255, 0, 0, 0, 255, 0, 10, 20, 30};
  s.trns = {0, 128};
  REQUIRE(decode(encode_png(s), 3).pixels == std::vector<uint8_t>{10, 20, 30, 255, 0, 0, 0, 255, 0});
  // A 4-bit palette.
  PngSpec four = png(2, 1, PNG_COLOR_TYPE_PALETTE, 4, {1, 0});
  four.palette = {1, 2, 3, 4, 5, 6};
  REQUIRE(decode(encode_png(four), 3).pixels == std::vector<uint8_t>{4, 5, 6, 1, 2, 3});
}

TEST_CASE("decode_image keeps the high byte of 16-bit PNGs and expands 1-bit gray to 0 and 255",
          "[datasets][images]") {
  REQUIRE(
      decode(encode_png(png(2, 1, PNG_COLOR_TYPE_RGB, 16, {0x1234, 0xffff, 0x00ff, 0x8000, 0x0100, 0xabcd})),
             3)
          .pixels == std::vector<uint8_t>{0x12, 0xff, 0x00, 0x80, 0x01, 0xab});
  REQUIRE(decode(encode_png(png(2, 1, PNG_COLOR_TYPE_GRAY, 16, {0xfe01, 0x0203})), 1).pixels ==
          std::vector<uint8_t>{0xfe, 0x02});
  REQUIRE(decode(encode_png(png(5, 1, PNG_COLOR_TYPE_GRAY, 1, {1, 0, 0, 1, 1})), 1).pixels ==
          std::vector<uint8_t>{255, 0, 0, 255, 255});
  REQUIRE(decode(encode_png(png(2, 1, PNG_COLOR_TYPE_GRAY, 2, {1, 3})), 1).pixels ==
          std::vector<uint8_t>{85, 255});
}

TEST_CASE("decode_image reads interlaced (Adam7) PNGs", "[datasets][images]") {
  const std::vector<uint8_t> px = gradient(13, 11, 3);
  PngSpec s = png(13, 11, PNG_COLOR_TYPE_RGB, 8, std::vector<uint16_t>(px.begin(), px.end()));
  s.interlaced = true;
  REQUIRE(decode(encode_png(s), 3).pixels == px);
}

TEST_CASE("decode_image reads baseline, progressive, gray and CMYK JPEGs close to what was encoded",
          "[datasets][images]") {
  const std::vector<uint8_t> rgb = gradient(32, 24, 3);
  JpegSpec s;
  s.width = 32;
  s.height = 24;
  s.samples = rgb;
  const Image baseline = decode(encode_jpeg(s), 3);
  REQUIRE(baseline.height == 24);
  REQUIRE(baseline.width == 32);
  REQUIRE(mean_abs_diff(baseline.pixels, rgb) < 2.0);
  s.progressive = true;
  const std::vector<uint8_t> progressive_bytes = encode_jpeg(s);
  REQUIRE(mean_abs_diff(decode(progressive_bytes, 3).pixels, rgb) < 2.0);

  JpegSpec g = s;
  g.color_space = JCS_GRAYSCALE;
  g.samples = gradient(32, 24, 1);
  g.progressive = false;
  const Image gray = decode(encode_jpeg(g), 1);
  REQUIRE(gray.channels == 1);
  REQUIRE(mean_abs_diff(gray.pixels, g.samples) < 1.5);
  REQUIRE(decode(encode_jpeg(g), 3).channels == 3);

  // CMYK as Photoshop writes it: inverted (255 - value), which libjpeg's Adobe marker announces.
  // Expected RGB: (255 - C) * (255 - K) / 255 of the un-inverted values.
  JpegSpec c = s;
  c.progressive = false;
  c.color_space = JCS_CMYK;
  c.samples.clear();
  std::vector<uint8_t> expected;
  for (int i = 0; i < 32 * 24; ++i) {
    const int C = 30 + i % 50, M = 100, Y = 200 - i % 40, K = 60;
    for (int v : {C, M, Y, K}) c.samples.push_back(uint8_t(255 - v));
    for (int v : {C, M, Y}) expected.push_back(uint8_t(((255 - v) * (255 - K) + 127) / 255));
  }
  REQUIRE(mean_abs_diff(decode(encode_jpeg(c), 3).pixels, expected) < 3.0);
}

TEST_CASE("decode_image tells the format by its first bytes, not the file name", "[datasets][images]") {
  TempDir dir;
  const std::vector<uint8_t> gray{5, 6, 7, 8};
  write_bytes(dir.path("really_a_png.jpg"), encode_png8(2, 2, 1, gray));
  REQUIRE(read_image_file(dir.path("really_a_png.jpg"), 1).pixels == gray);
  REQUIRE(sniff_image_format(gray.data(), gray.size()) == ImageFormat::unknown);
}

TEST_CASE("decode_image names the file and the fault: empty, not an image, truncated, corrupt",
          "[datasets][images]") {
  const std::vector<uint8_t> png_bytes = encode_png8(16, 16, 3, gradient(16, 16, 3));
  REQUIRE_THROWS_WITH(decode({}, 3), "'x.img' is empty (0 bytes), not an image");
  REQUIRE_THROWS_WITH(decode(to_bytes("hello, world"), 3), Contains("'x.img' is not a PNG or JPEG image"));
  std::vector<uint8_t> cut(png_bytes.begin(), png_bytes.begin() + long(png_bytes.size() / 2));
  REQUIRE_THROWS_AS(decode(cut, 3), DataError);
  REQUIRE_THROWS_WITH(decode(cut, 3), Contains("'x.img': corrupt PNG") && Contains("truncated"));
  std::vector<uint8_t> header_only(png_bytes.begin(), png_bytes.begin() + 20);
  REQUIRE_THROWS_WITH(decode(header_only, 3), Contains("corrupt PNG (header)") && Contains("truncated"));
  std::vector<uint8_t> flipped = png_bytes;
  flipped[chunk_data(flipped, "IDAT") + 5] ^= 0x55;  // the compressed stream breaks first
  REQUIRE_THROWS_WITH(decode(flipped, 3), Contains("'x.img': corrupt PNG (image data): IDAT: "));
  std::vector<uint8_t> bad_crc = png_bytes;
  const size_t idat = chunk_data(bad_crc, "IDAT");
  const size_t idat_len = size_t(bad_crc[idat - 6]) << 8 | bad_crc[idat - 5];
  bad_crc[idat + idat_len] ^= 0x01;  // the first byte of the IDAT chunk's CRC
  REQUIRE_THROWS_WITH(decode(bad_crc, 3), "'x.img': corrupt PNG (image data): IDAT: CRC error");

  JpegSpec s;
  s.width = 64;
  s.height = 64;
  s.samples = gradient(64, 64, 3);
  const std::vector<uint8_t> jpeg = encode_jpeg(s);
  std::vector<uint8_t> jcut(jpeg.begin(), jpeg.begin() + long(jpeg.size() * 2 / 3));
  REQUIRE_THROWS_WITH(decode(jcut, 3),
                      "'x.img': corrupt JPEG (image data): truncated: the data ends before the image does");
  std::vector<uint8_t> jhead(jpeg.begin(), jpeg.begin() + 40);
  REQUIRE_THROWS_WITH(decode(jhead, 3), Contains("'x.img': corrupt JPEG (header)"));
  std::vector<uint8_t> garbage = {0xff, 0xd8, 0xff, 0x00, 0x01, 0x02};
  REQUIRE_THROWS_AS(decode(garbage, 3), DataError);
}

TEST_CASE("decode_image refuses an image whose header claims more pixels than the limit, before decoding",
          "[datasets][images]") {
  // A PNG whose IHDR says 100000 x 100000 (CRC fixed up), followed by nothing of that size.
  std::vector<uint8_t> bomb = encode_png8(4, 4, 1, std::vector<uint8_t>(16, 1));
  const size_t ihdr = chunk_data(bomb, "IHDR");
  put_be32(bomb, ihdr, 100000);
  put_be32(bomb, ihdr + 4, 100000);
  put_be32(bomb, ihdr + 13, uint32_t(crc32(0, bomb.data() + ihdr - 4, 17)));
  REQUIRE_THROWS_WITH(
      decode(bomb, 1),
      "'x.img': the PNG header claims 100000x100000 = 10000000000 pixels, more than the limit of "
      "89478485 (a decompression bomb, or raise the source's max_pixels if the image is real)");
  // The same for a JPEG: its SOF0 marker says 60000 x 60000.
  JpegSpec s;
  s.width = 8;
  s.height = 8;
  s.samples = gradient(8, 8, 3);
  std::vector<uint8_t> jpeg = encode_jpeg(s);
  size_t sof = 0;
  for (size_t i = 2; i + 1 < jpeg.size(); ++i)
    if (jpeg[i] == 0xff && jpeg[i + 1] == 0xc0) sof = i;
  REQUIRE(sof > 0);
  for (size_t at : {sof + 5, sof + 7}) jpeg[at] = 60000 >> 8, jpeg[at + 1] = 60000 & 0xff;
  REQUIRE_THROWS_WITH(decode(jpeg, 3), Contains("the JPEG header claims 60000x60000 = 3600000000 pixels"));
  // A smaller limit applies the same way.
  REQUIRE_THROWS_WITH(decode(encode_png8(4, 4, 1, std::vector<uint8_t>(16, 1)), 1, 15),
                      Contains("4x4 = 16 pixels, more than the limit of 15"));
  REQUIRE(decode(encode_png8(4, 4, 1, std::vector<uint8_t>(16, 1)), 1, 16).pixels.size() == 16);
}
