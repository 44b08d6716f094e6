// Shape: the dimensions of one tensor, outermost first (NCHW / NCW / NF, batch excluded unless
// stated). Small value type; shapes are planned before any allocation.
//
// Sizes come from the user's config, so every product is taken with overflow-checked arithmetic
// and bounded (kMaxTensorElements) before anything is allocated: a config whose sizes overflow
// int64 is a config error, never a wrapped negative count or a crash inside a kernel library.
#pragma once

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

namespace trainer {

// The most elements one tensor may hold, batch included: 2^31 - 1 (8 GiB of floats). cuDNN's
// tensor descriptors and cuBLAS take int dimensions, so this is the GPU backend's limit; the CPU
// backend shares it so that a config means the same on every device.
constexpr int64_t kMaxTensorElements = (int64_t(1) << 31) - 1;
// The most elements of a whole arena (all parameters; activations of one batch): 2^40, more than
// any machine holds, so that byte counts (x4 bytes, x optimizer slots) can never overflow.
constexpr int64_t kMaxArenaElements = int64_t(1) << 40;

// a * b into *out; false when the exact result does not fit in int64.
inline bool checked_mul(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

// "21,840"
inline std::string with_thousands(int64_t v) {
  std::string s = std::to_string(v);
  for (int i = int(s.size()) - 3; i > (s[0] == '-' ? 1 : 0); i -= 3) s.insert(size_t(i), ",");
  return s;
}

struct Shape {
  std::vector<int64_t> dims;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d) : dims(d) {}
  explicit Shape(std::vector<int64_t> d) : dims(std::move(d)) {}

  size_t rank() const { return dims.size(); }
  int64_t operator[](size_t i) const { return dims[i]; }
  int64_t& operator[](size_t i) { return dims[i]; }
  // The number of elements; INT64_MAX when the product overflows (callers that take sizes from
  // a config check fits() first, so this saturation is a backstop, never a result).
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims)
      if (!checked_mul(n, d, &n)) return INT64_MAX;
    return n;
  }
  // True when the product of dims (times batch) is at most `limit`.
  bool fits(int64_t limit = kMaxTensorElements, int64_t batch = 1) const {
    int64_t n = batch;
    for (int64_t d : dims)
      if (d < 0 || !checked_mul(n, d, &n)) return false;
    return n <= limit;
  }
  // The element count for messages: exact ("3,288,334,336") or, past int64, "about 1.84e+19".
  std::string numel_str(int64_t batch = 1) const {
    int64_t n = batch;
    long double approx = batch;
    bool exact = true;
    for (int64_t d : dims) {
      approx *= d;
      exact = exact && checked_mul(n, d, &n);
    }
    if (exact) return with_thousands(n);
    char buf[48];
    std::snprintf(buf, sizeof buf, "about %.3Lg", approx);
    return buf;
  }
  bool operator==(const Shape& o) const { return dims == o.dims; }
  bool operator!=(const Shape& o) const { return dims != o.dims; }

  // "(1, 28, 28)"; with a leading batch placeholder: "(None, 1, 28, 28)" as Keras prints it.
  std::string str() const {
    std::string s = "(";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + (dims.size() == 1 ? ",)" : ")");
  }
  std::string batched_str() const {
    std::string s = "(None";
    for (int64_t d : dims) s += ", " + std::to_string(d);
    return s + ")";
  }
};

}  // namespace trainer
