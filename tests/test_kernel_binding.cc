// The kernel contract's typed views (lib/backend/layer_kernel.h) and the one alignment rule
// (lib/model/arena_layout.h): a kernel refuses a view of another dtype, asks for tensors by index
// only within what it was given, and every tensor of every arena the model lays out is aligned.
#include <yaml-cpp/yaml.h>

#include <catch2/catch.hpp>

#include "kernels/cpu/cpu_backend.h"
#include "lib/backend/layer_kernel.h"
#include "lib/core/error.h"
#include "lib/model/arena_layout.h"
#include "lib/model/model.h"
#include "lib/registry/registry.h"

using namespace trainer;

TEST_CASE("a view's f32() gives its data for f32 and throws for bf16 and f16", "[contract]") {
  float data[4] = {};
  TensorView v;
  v.data = data;
  v.shape = Shape{4};
  REQUIRE(v.f32() == data);
  for (DType t : {DType::bf16, DType::f16}) {
    v.dtype = t;
    REQUIRE_THROWS_AS(v.f32(), InternalError);
  }
  KernelBinding b;
  b.params.push_back(v);
  REQUIRE_THROWS_AS(b.param(1), InternalError);  // a dense layer without bias has no params[1]
  REQUIRE_THROWS_AS(b.input(), InternalError);
}

TEST_CASE("a CPU kernel bound to a bf16 parameter view refuses it instead of reading it as floats",
          "[contract]") {
  Model model(Shape{3}, YAML::Load("[{type: dense, units: 2}]"), InitScheme::torch, "test");
  CpuBackend backend;
  KernelContext ctx;
  ctx.backend = &backend;
  ctx.batch = 1;
  auto kernel = Registry::global().make_kernel("cpu", *model.layers()[0], ctx);
  float w[6] = {}, b[2] = {}, x[3] = {}, y[2] = {}, dy[2] = {};
  auto view = [](float* p, Shape s, DType t = DType::f32) {
    TensorView v;
    v.data = p;
    v.shape = std::move(s);
    v.dtype = t;
    return v;
  };
  KernelBinding kb;
  kb.params = {view(w, Shape{2, 3}, DType::bf16), view(b, Shape{2})};
  kb.grads = {view(w, Shape{2, 3}), view(b, Shape{2})};
  kb.inputs = {view(x, Shape{1, 3})};
  kb.input_grads = {view(nullptr, Shape{1, 3})};
  kb.output = view(y, Shape{1, 2});
  kb.output_grad = view(dy, Shape{1, 2});
  REQUIRE_THROWS_AS(kernel->bind(kb), InternalError);
  kb.params[0].dtype = DType::f32;
  REQUIRE_NOTHROW(kernel->bind(kb));
}

TEST_CASE("every parameter and buffer slot of a model starts on the one arena alignment", "[contract]") {
  // Odd sizes everywhere: 3x3x3x5 weights, 5 biases, 5-channel batchnorm.
  Model model(Shape{3, 6, 6},
              YAML::Load("[{type: conv2d, filters: 5, kernel_size: 3}, {type: batchnorm}, {type: flatten}, "
                         "{type: dense, units: 7}]"),
              InitScheme::torch, "test");
  for (const auto* slots : {&model.params(), &model.buffers()})
    for (const TensorSlot& s : *slots) {
      INFO(s.name);
      REQUIRE(size_t(s.offset) * sizeof(float) % kArenaAlign == 0);
    }
  REQUIRE(size_t(model.param_arena_floats()) * sizeof(float) % kArenaAlign == 0);
  REQUIRE(size_t(model.buffer_arena_floats()) * sizeof(float) % kArenaAlign == 0);
  ArenaLayout arena(1000);
  size_t at = 1;
  REQUIRE(arena.place(4, &at));
  REQUIRE(at == 0);
  REQUIRE(arena.place(0, &at));
  REQUIRE(at == kArenaAlign);
  REQUIRE_FALSE(arena.place(1000, &at));  // past the limit: nothing placed
  REQUIRE(arena.bytes() == kArenaAlign);
}
