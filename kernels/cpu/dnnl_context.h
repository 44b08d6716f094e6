// The CPU backend's oneDNN engine and stream, and helpers to describe plain f32 tensors.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "lib/core/error.h"

namespace trainer {

struct DnnlContext {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};

// Plain (row-major) f32 memory descriptor for dims; tag picked from the rank.
dnnl::memory::desc plain_md(const dnnl::memory::dims& dims);

// Runs a oneDNN call and turns dnnl::error into a RuntimeError naming the call and file:line.
// Variadic so that a braced block with commas can be passed.
#define DNNL_CHECK(...)                                                                                 \
  do {                                                                                                  \
    try {                                                                                               \
      __VA_ARGS__;                                                                                      \
    } catch (const dnnl::error& e_) {                                                                   \
      throw ::trainer::RuntimeError(std::string("oneDNN: ") + #__VA_ARGS__ + " failed at " + __FILE__ + \
                                    ":" + std::to_string(__LINE__) + ": " + e_.what());                 \
    }                                                                                                   \
  } while (0)

}  // namespace trainer
