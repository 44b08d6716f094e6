// Decoding PNG and JPEG bytes into 8-bit pixels, HWC order, with the channel count the model takes.
//
//   PNG   libpng: 1/2/4/8/16-bit gray, gray+alpha, RGB, RGBA, palette, interlaced. 16-bit samples
//         keep their high byte (png_set_strip_16, as Pillow reads 16-bit RGB); palettes and
//         low-bit gray are expanded to 8 bits; alpha (and tRNS transparency) is dropped.
//   JPEG  libjpeg-turbo: baseline and progressive; grayscale, YCbCr (to RGB by libjpeg), CMYK and
//         YCCK (Adobe files store CMYK inverted: the APP14 marker says so), converted to RGB as
//         Pillow does: R = (255 - C) * (255 - K) / 255.
// The format is told by the first bytes (PNG: 89 'P' 'N' 'G' \r \n 1a \n; JPEG: ff d8 ff), never by
// the file name. Channels: 1 (gray) or 3 (RGB); RGB to gray uses ITU-R 601-2 luma with Pillow's
// integer weights (L = (19595 R + 38470 G + 7471 B + 32768) >> 16), gray to RGB repeats the value.
//
// The pixel limit (width * height, default Pillow's decompression-bomb limit 89,478,485) is checked
// against the header before any pixel buffer is allocated. Every failure is a DataError naming the
// file and what is wrong: empty, not a PNG or JPEG, truncated, corrupt (the library's own words),
// too many pixels. A truncated JPEG is an error (libjpeg would pad it with gray and warn).
//
// libpng and libjpeg report errors by longjmp. Only plain-C frames lie between each library call
// and its setjmp (image_decode.cc says how), so no C++ destructor is ever skipped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace trainer {

enum class ImageFormat { unknown, png, jpeg };

// Pillow's Image.MAX_IMAGE_PIXELS: images above it are refused.
constexpr int64_t default_max_image_pixels = 89478485;

// From the first bytes; unknown for anything else (and for fewer than 3 bytes).
ImageFormat sniff_image_format(const uint8_t* data, size_t size);
const char* image_format_name(ImageFormat f);  // "PNG", "JPEG", "unknown"

struct Image {
  int64_t height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;  // (height, width, channels), row-major
};

// name: the file, for messages. channels: 1 or 3.
Image decode_image(const uint8_t* data, size_t size, const std::string& name, int channels,
                   int64_t max_pixels = default_max_image_pixels);

// Reads a whole image file (regular files only, datasets/file_bytes.h) and decodes it.
Image read_image_file(const std::string& path, int channels, int64_t max_pixels = default_max_image_pixels);

// The bytes of a regular file as stored (never gunzipped); DataError naming the file otherwise.
std::vector<uint8_t> read_stored_file(const std::string& path);

}  // namespace trainer
