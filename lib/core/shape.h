// Shape: the dimensions of one tensor, outermost first (NCHW / NCW / NF, batch excluded unless
// stated). Small value type; shapes are planned before any allocation.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace trainer {

struct Shape {
  std::vector<int64_t> dims;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d) : dims(d) {}
  explicit Shape(std::vector<int64_t> d) : dims(std::move(d)) {}

  size_t rank() const { return dims.size(); }
  int64_t operator[](size_t i) const { return dims[i]; }
  int64_t& operator[](size_t i) { return dims[i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
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
