// JPEG decoding (libjpeg-turbo through datasets/image_decode.cc) and the resize/crop of what it
// gives. Input and options: tests/fuzz/fuzz_image.h. Seeds: baseline, progressive, gray, CMYK.
#include "tests/fuzz/fuzz_image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return trainer::fuzz::fuzz_one_image(data, size);
}
