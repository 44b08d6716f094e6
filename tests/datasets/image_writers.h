// Test helpers that encode PNG (libpng) and JPEG (libjpeg) files in memory, so the image tests
// make every kind of file they decode. Header-only; everything lives in trainer::dataset_tests.
// The setjmp/longjmp discipline is the decoder's: only plain C values in the setjmp frames.
#pragma once

// clang-format off
#include <cstdio>
#include <jpeglib.h>
// clang-format on
#include <png.h>
#include <zlib.h>

#include <csetjmp>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace trainer {
namespace dataset_tests {

struct PngSpec {
  int width = 1, height = 1;
  int color_type = PNG_COLOR_TYPE_GRAY;  // PNG_COLOR_TYPE_*
  int bit_depth = 8;
  bool interlaced = false;
  // Samples row-major, one value per sample (16-bit samples as 0..65535, packed bit depths as
  // 0..2^depth-1, palette images as indices).
  std::vector<uint16_t> samples;
  std::vector<uint8_t> palette;  // r,g,b triples for palette images
  std::vector<uint8_t> trns;     // palette transparency (optional)
};

namespace detail {

inline void png_append(png_structp png, png_bytep data, size_t n) {
  auto* out = static_cast<std::vector<uint8_t>*>(png_get_io_ptr(png));
  out->insert(out->end(), data, data + n);
}
inline void png_flush_none(png_structp) {}

inline int png_write_c(png_structp png, png_infop info, const PngSpec* s, png_bytepp rows, void* out) {
  if (setjmp(png_jmpbuf(png))) return 0;
  png_set_write_fn(png, out, png_append, png_flush_none);
  png_set_IHDR(png, info, png_uint_32(s->width), png_uint_32(s->height), s->bit_depth, s->color_type,
               s->interlaced ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (!s->palette.empty())
    png_set_PLTE(png, info, reinterpret_cast<png_const_colorp>(s->palette.data()),
                 int(s->palette.size() / 3));
  if (!s->trns.empty()) png_set_tRNS(png, info, s->trns.data(), int(s->trns.size()), nullptr);
  png_write_info(png, info);
  if (s->bit_depth == 16) png_set_swap(png);  // our rows hold little-endian uint16
  png_write_image(png, rows);
  png_write_end(png, info);
  return 1;
}

}  // namespace detail

inline int png_channels(int color_type) {
  switch (color_type) {
    case PNG_COLOR_TYPE_GRAY_ALPHA:
      return 2;
    case PNG_COLOR_TYPE_RGB:
      return 3;
    case PNG_COLOR_TYPE_RGB_ALPHA:
      return 4;
    default:
      return 1;
  }
}

inline std::vector<uint8_t> encode_png(const PngSpec& s) {
  const int channels = png_channels(s.color_type);
  const size_t per_row = size_t(s.width) * size_t(channels);
  if (s.samples.size() != per_row * size_t(s.height))
    throw std::runtime_error("encode_png: wrong sample count");
  // Rows packed as libpng expects them (big-endian bit packing for depths below 8).
  const size_t row_bytes = (per_row * size_t(s.bit_depth) + 7) / 8;
  std::vector<uint8_t> pixels(row_bytes * size_t(s.height), 0);
  for (int y = 0; y < s.height; ++y) {
    uint8_t* row = pixels.data() + size_t(y) * row_bytes;
    for (size_t i = 0; i < per_row; ++i) {
      const uint16_t v = s.samples[size_t(y) * per_row + i];
      if (s.bit_depth == 16) {
        std::memcpy(row + 2 * i, &v, 2);
      } else if (s.bit_depth == 8) {
        row[i] = uint8_t(v);
      } else {
        const size_t bit = i * size_t(s.bit_depth);
        row[bit / 8] |= uint8_t(v << (8 - s.bit_depth - bit % 8));
      }
    }
  }
  std::vector<png_bytep> rows(size_t(s.height));
  for (int y = 0; y < s.height; ++y) rows[size_t(y)] = pixels.data() + size_t(y) * row_bytes;
  std::vector<uint8_t> out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png ? png_create_info_struct(png) : nullptr;
  const int ok = info ? detail::png_write_c(png, info, &s, rows.data(), &out) : 0;
  png_destroy_write_struct(&png, &info);
  if (!ok) throw std::runtime_error("encode_png failed");
  return out;
}

// 8-bit gray (channels 1) or RGB (3) samples, row-major HWC.
inline std::vector<uint8_t> encode_png8(int width, int height, int channels,
                                        const std::vector<uint8_t>& hwc) {
  PngSpec s;
  s.width = width;
  s.height = height;
  s.color_type = channels == 1 ? PNG_COLOR_TYPE_GRAY : PNG_COLOR_TYPE_RGB;
  s.samples.assign(hwc.begin(), hwc.end());
  return encode_png(s);
}

struct JpegSpec {
  int width = 1, height = 1;
  J_COLOR_SPACE color_space = JCS_RGB;  // of the samples: JCS_GRAYSCALE, JCS_RGB or JCS_CMYK
  std::vector<uint8_t> samples;         // row-major, 1, 3 or 4 per pixel
  int quality = 95;
  bool progressive = false;
};

namespace detail {

struct JpegWriteErrors {
  jpeg_error_mgr mgr;
  jmp_buf jump;
};
inline void jpeg_write_error(j_common_ptr cinfo) {
  longjmp(reinterpret_cast<JpegWriteErrors*>(cinfo->err)->jump, 1);
}

inline int jpeg_write_c(jpeg_compress_struct* c, JpegWriteErrors* e, const JpegSpec* s, unsigned char** buf,
                        unsigned long* size) {
  if (setjmp(e->jump)) return 0;
  jpeg_create_compress(c);
  jpeg_mem_dest(c, buf, size);
  c->image_width = JDIMENSION(s->width);
  c->image_height = JDIMENSION(s->height);
  c->input_components = s->color_space == JCS_GRAYSCALE ? 1 : s->color_space == JCS_CMYK ? 4 : 3;
  c->in_color_space = s->color_space;
  jpeg_set_defaults(c);
  jpeg_set_quality(c, s->quality, TRUE);
  if (s->progressive) jpeg_simple_progression(c);
  jpeg_start_compress(c, TRUE);
  const size_t row = size_t(s->width) * size_t(c->input_components);
  while (c->next_scanline < c->image_height) {
    JSAMPROW r = const_cast<JSAMPROW>(s->samples.data() + c->next_scanline * row);
    jpeg_write_scanlines(c, &r, 1);
  }
  jpeg_finish_compress(c);
  return 1;
}

}  // namespace detail

inline std::vector<uint8_t> encode_jpeg(const JpegSpec& s) {
  jpeg_compress_struct c;
  std::memset(&c, 0, sizeof c);
  detail::JpegWriteErrors e;
  c.err = jpeg_std_error(&e.mgr);
  e.mgr.error_exit = detail::jpeg_write_error;
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  const int ok = detail::jpeg_write_c(&c, &e, &s, &buf, &size);
  jpeg_destroy_compress(&c);
  std::vector<uint8_t> out(buf, buf + (ok ? size : 0));
  std::free(buf);
  if (!ok) throw std::runtime_error("encode_jpeg failed");
  return out;
}

// A smooth test pattern (JPEG keeps such content within a few levels), (h, w, c) row-major.
inline std::vector<uint8_t> gradient(int width, int height, int channels) {
  std::vector<uint8_t> v(size_t(width) * size_t(height) * size_t(channels));
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < channels; ++c)
        v[(size_t(y) * size_t(width) + size_t(x)) * size_t(channels) + size_t(c)] =
            uint8_t(40 + (x * 120) / width + (y * 60) / height + c * 20);
  return v;
}

}  // namespace dataset_tests
}  // namespace trainer
