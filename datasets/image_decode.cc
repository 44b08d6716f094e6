// PNG through libpng's classic API and JPEG through libjpeg(-turbo), both from memory.
//
// The longjmp discipline: each library call that can fail runs inside a "phase" function that
// holds only plain C values (pointers, ints, the library's own structs) and calls setjmp first.
// A library error longjmps back into that phase, which returns a failure code; the C++ caller
// (which owns every std::vector and std::string, and the library struct through a guard) then
// throws. A longjmp therefore never crosses a frame with a destructor. Buffers the phases write
// into are allocated by the caller between the header phase and the pixel phase, after the
// pixel limit was checked.
#include "datasets/image_decode.h"

// clang-format off
#include <cstdio>   // jpeglib.h needs FILE and size_t first
#include <jpeglib.h>
#include <jerror.h>
// clang-format on
#include <png.h>

#include <csetjmp>
#include <cstring>
#include <new>

#include "datasets/file_bytes.h"
#include "lib/core/error.h"

namespace trainer {
namespace {

constexpr int kMaxJpegScans = 500;  // as libjpeg-turbo's own fuzzers: a progressive file may not loop

// ---- shared: the pixel limit and the channel conversion ----

std::string pixel_text(int64_t w, int64_t h) { return std::to_string(w) + "x" + std::to_string(h); }

void check_pixels(const std::string& name, const char* format, int64_t width, int64_t height,
                  int64_t max_pixels) {
  if (width <= 0 || height <= 0)
    throw DataError("'" + name + "': corrupt " + format + ": the header gives a size of " +
                    pixel_text(width, height));
  if (width * height > max_pixels)
    throw DataError("'" + name + "': the " + format + " header claims " + pixel_text(width, height) + " = " +
                    std::to_string(width * height) + " pixels, more than the limit of " +
                    std::to_string(max_pixels) +
                    " (a decompression bomb, or raise the source's max_pixels if the image is real)");
}

std::vector<uint8_t> allocate(const std::string& name, size_t bytes) {
  try {
    return std::vector<uint8_t>(bytes);
  } catch (const std::bad_alloc&) {
    throw OutOfMemoryError("'" + name + "': out of host memory for its pixels (" + std::to_string(bytes) +
                           " bytes)");
  }
}

// (h, w, from) -> (h, w, to) for from, to in {1, 3}.
Image convert_channels(Image im, int to) {
  if (im.channels == to) return im;
  const int64_t n = im.height * im.width;
  std::vector<uint8_t> out(size_t(n * to));
  const uint8_t* s = im.pixels.data();
  if (to == 1) {
    for (int64_t i = 0; i < n; ++i, s += 3)
      out[size_t(i)] = uint8_t((19595u * s[0] + 38470u * s[1] + 7471u * s[2] + 0x8000u) >> 16);
  } else {
    for (int64_t i = 0; i < n; ++i)
      out[size_t(3 * i)] = out[size_t(3 * i + 1)] = out[size_t(3 * i + 2)] = s[i];
  }
  im.pixels = std::move(out);
  im.channels = to;
  return im;
}

// ---- PNG ----

struct PngSource {
  const uint8_t* data;
  size_t size, pos;
  char message[256];  // the first error libpng reported
};

void png_read_bytes(png_structp png, png_bytep dst, size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->size - src->pos) png_error(png, "truncated: the file ends before the image data does");
  std::memcpy(dst, src->data + src->pos, n);
  src->pos += n;
}

void png_on_error(png_structp png, png_const_charp message) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  if (src->message[0] == 0) std::snprintf(src->message, sizeof src->message, "%s", message);
  png_longjmp(png, 1);
}

void png_on_warning(png_structp, png_const_charp) {}  // benign: the pixels are still read

struct PngHeader {
  png_uint_32 width, height;
  int channels;  // after the transforms: 1 or 3
  size_t row_bytes;
};

// Phase 1: the chunks before the image data (IHDR gives the size; nothing image-sized is allocated).
int png_read_head(png_structp png, png_infop info, PngHeader* h) {
  if (setjmp(png_jmpbuf(png))) return 0;
  png_read_info(png, info);
  h->width = png_get_image_width(png, info);
  h->height = png_get_image_height(png, info);
  return 1;
}

// Phase 2, once the size passed the pixel limit: the transforms to 8-bit gray or RGB, which size
// libpng's row buffers. Alpha (and a palette's tRNS transparency) is dropped.
int png_set_transforms(png_structp png, png_infop info, PngHeader* h) {
  if (setjmp(png_jmpbuf(png))) return 0;
  const int bit_depth = png_get_bit_depth(png, info), color_type = png_get_color_type(png, info);
  if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color_type == PNG_COLOR_TYPE_GRAY && bit_depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (bit_depth == 16) png_set_strip_16(png);
  png_set_strip_alpha(png);  // also the alpha that a palette's tRNS expands to
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  h->channels = png_get_channels(png, info);
  h->row_bytes = png_get_rowbytes(png, info);
  return 1;
}

// Phase 3: every row (all passes when interlaced) and the chunks after them.
int png_read_pixels(png_structp png, png_infop info, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return 0;
  png_read_image(png, rows);
  png_read_end(png, info);
  return 1;
}

struct PngGuard {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngGuard() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

Image decode_png(const uint8_t* data, size_t size, const std::string& name, int64_t max_pixels) {
  PngSource src{data, size, 0, {0}};
  PngGuard g;
  g.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
  if (g.png) g.info = png_create_info_struct(g.png);
  if (!g.png || !g.info) throw OutOfMemoryError("'" + name + "': libpng could not start (out of memory)");
  png_set_read_fn(g.png, &src, png_read_bytes);
  // libpng's own limits stay above ours, so ours speaks first.
  png_set_user_limits(g.png, 0x7fffffff, 0x7fffffff);
  const auto fail = [&](const char* when) {
    return DataError("'" + name + "': corrupt PNG (" + when + "): " + src.message);
  };
  PngHeader h{};
  if (!png_read_head(g.png, g.info, &h)) throw fail("header");
  check_pixels(name, "PNG", h.width, h.height, max_pixels);
  if (!png_set_transforms(g.png, g.info, &h)) throw fail("header");
  if (h.channels != 1 && h.channels != 3)
    throw DataError("'" + name + "': corrupt PNG: " + std::to_string(h.channels) +
                    " channels after conversion");
  Image im;
  im.height = h.height;
  im.width = h.width;
  im.channels = h.channels;
  im.pixels = allocate(name, size_t(h.height) * h.row_bytes);
  std::vector<png_bytep> rows(h.height);
  for (size_t y = 0; y < rows.size(); ++y) rows[y] = im.pixels.data() + y * h.row_bytes;
  if (!png_read_pixels(g.png, g.info, rows.data())) throw fail("image data");
  return im;
}

// ---- JPEG ----

struct JpegErrors {
  jpeg_error_mgr mgr;  // first: libjpeg sees a jpeg_error_mgr*
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_on_error(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  longjmp(e->jump, 1);
}

// Warnings (level -1) about damaged data are tolerated, except the end of the data before the
// image's end: libjpeg would fill the rest with gray, which is a truncated file.
void jpeg_on_message(j_common_ptr cinfo, int level) {
  if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
    auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
    std::snprintf(e->message, sizeof e->message, "truncated: the data ends before the image does");
    longjmp(e->jump, 1);
  }
}

void jpeg_on_progress(j_common_ptr cinfo) {
  if (cinfo->is_decompressor &&
      reinterpret_cast<j_decompress_ptr>(cinfo)->input_scan_number > kMaxJpegScans) {
    auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
    std::snprintf(e->message, sizeof e->message, "more than %d scans", kMaxJpegScans);
    longjmp(e->jump, 1);
  }
}

struct JpegHeader {
  JDIMENSION width, height;
  int components;  // of the output: 1 (gray), 3 (RGB) or 4 (CMYK)
  int adobe_inverted;
};

// Phase 1: the markers up to the first scan; chooses the output color space.
int jpeg_read_head(j_decompress_ptr cinfo, JpegErrors* e, const uint8_t* data, size_t size, JpegHeader* h) {
  if (setjmp(e->jump)) return 0;
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  switch (cinfo->jpeg_color_space) {
    case JCS_GRAYSCALE:
      cinfo->out_color_space = JCS_GRAYSCALE;
      break;
    case JCS_CMYK:
    case JCS_YCCK:
      cinfo->out_color_space = JCS_CMYK;
      break;
    default:
      cinfo->out_color_space = JCS_RGB;
  }
  h->width = cinfo->image_width;
  h->height = cinfo->image_height;
  h->components = cinfo->out_color_space == JCS_GRAYSCALE ? 1 : cinfo->out_color_space == JCS_CMYK ? 4 : 3;
  h->adobe_inverted = cinfo->saw_Adobe_marker;
  return 1;
}

// Phase 2: decompresses into `out` (height rows of width * components bytes).
int jpeg_read_pixels(j_decompress_ptr cinfo, JpegErrors* e, uint8_t* out, size_t row_bytes) {
  if (setjmp(e->jump)) return 0;
  jpeg_start_decompress(cinfo);
  if (size_t(cinfo->output_width) * size_t(cinfo->output_components) != row_bytes) {
    std::snprintf(e->message, sizeof e->message, "unexpected output size");
    return 0;
  }
  while (cinfo->output_scanline < cinfo->output_height) {
    JSAMPROW row = out + size_t(cinfo->output_scanline) * row_bytes;
    jpeg_read_scanlines(cinfo, &row, 1);
  }
  jpeg_finish_decompress(cinfo);
  return 1;
}

struct JpegGuard {
  jpeg_decompress_struct cinfo;
  explicit JpegGuard(JpegErrors* e) {
    std::memset(&cinfo, 0, sizeof cinfo);
    cinfo.err = jpeg_std_error(&e->mgr);
    e->mgr.error_exit = jpeg_on_error;
    e->mgr.emit_message = jpeg_on_message;
  }
  ~JpegGuard() { jpeg_destroy_decompress(&cinfo); }
};

// Pillow's MULDIV255: a * b / 255, rounded.
inline uint8_t mul_div_255(unsigned a, unsigned b) {
  const unsigned t = a * b + 128;
  return uint8_t(((t >> 8) + t) >> 8);
}

Image decode_jpeg(const uint8_t* data, size_t size, const std::string& name, int64_t max_pixels) {
  JpegErrors e{};
  JpegGuard g(&e);
  jpeg_progress_mgr progress{};
  progress.progress_monitor = jpeg_on_progress;
  // jpeg_create_decompress may fail (out of memory) through error_exit: it needs its own phase.
  const auto create = [](j_decompress_ptr cinfo, JpegErrors* errors) -> int {
    if (setjmp(errors->jump)) return 0;
    jpeg_create_decompress(cinfo);
    return 1;
  };
  if (!create(&g.cinfo, &e)) throw OutOfMemoryError("'" + name + "': libjpeg could not start: " + e.message);
  g.cinfo.progress = &progress;
  JpegHeader h{};
  if (!jpeg_read_head(&g.cinfo, &e, data, size, &h))
    throw DataError("'" + name + "': corrupt JPEG (header): " + e.message);
  check_pixels(name, "JPEG", h.width, h.height, max_pixels);
  const size_t row_bytes = size_t(h.width) * size_t(h.components);
  std::vector<uint8_t> raw = allocate(name, row_bytes * h.height);
  if (!jpeg_read_pixels(&g.cinfo, &e, raw.data(), row_bytes))
    throw DataError("'" + name + "': corrupt JPEG (image data): " + e.message);
  Image im;
  im.height = h.height;
  im.width = h.width;
  if (h.components != 4) {
    im.channels = h.components;
    im.pixels = std::move(raw);
    return im;
  }
  // CMYK -> RGB, in place (3 of every 4 bytes). Adobe's inverted CMYK stores 255 - C, so for it
  // R = C' * K' / 255; for plain CMYK, R = (255 - C) * (255 - K) / 255.
  const int64_t n = im.height * im.width;
  const bool inverted = h.adobe_inverted != 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = raw.data() + 4 * i;
    const unsigned k = inverted ? p[3] : 255u - p[3];
    uint8_t rgb[3];
    for (int c = 0; c < 3; ++c) rgb[c] = mul_div_255(inverted ? p[c] : 255u - p[c], k);
    std::memcpy(raw.data() + 3 * i, rgb, 3);
  }
  raw.resize(size_t(n * 3));
  im.channels = 3;
  im.pixels = std::move(raw);
  return im;
}

}  // namespace

ImageFormat sniff_image_format(const uint8_t* data, size_t size) {
  static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 8 && std::memcmp(data, png_magic, 8) == 0) return ImageFormat::png;
  if (size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff) return ImageFormat::jpeg;
  return ImageFormat::unknown;
}

const char* image_format_name(ImageFormat f) {
  return f == ImageFormat::png ? "PNG" : f == ImageFormat::jpeg ? "JPEG" : "unknown";
}

Image decode_image(const uint8_t* data, size_t size, const std::string& name, int channels,
                   int64_t max_pixels) {
  if (channels != 1 && channels != 3)
    throw InternalError("decode_image: channels must be 1 or 3, not " + std::to_string(channels));
  if (size == 0) throw DataError("'" + name + "' is empty (0 bytes), not an image");
  Image im;
  switch (sniff_image_format(data, size)) {
    case ImageFormat::png:
      im = decode_png(data, size, name, max_pixels);
      break;
    case ImageFormat::jpeg:
      im = decode_jpeg(data, size, name, max_pixels);
      break;
    default:
      throw DataError("'" + name + "' is not a PNG or JPEG image (its first bytes are neither signature)");
  }
  return convert_channels(std::move(im), channels);
}

std::vector<uint8_t> read_stored_file(const std::string& path) {
  DataFile f(path, DataFile::Gzip::never);
  std::vector<uint8_t> bytes = allocate(path, size_t(f.file_size()));
  const size_t got = f.read(bytes.data(), bytes.size());
  if (got != bytes.size() || !f.at_end()) throw DataError("'" + path + "' changed size while it was read");
  return bytes;
}

Image read_image_file(const std::string& path, int channels, int64_t max_pixels) {
  const std::vector<uint8_t> bytes = read_stored_file(path);
  return decode_image(bytes.data(), bytes.size(), path, channels, max_pixels);
}

}  // namespace trainer
