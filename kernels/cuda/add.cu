// Element-wise sums (see add.cuh): grid-stride loops; the same order of additions as the CPU's
// (input 1 first), so f32 results match it bit for bit. An element-wise map (map16.cuh): where a,
// b and y start 16-byte aligned a thread moves 16 bytes of each a step; one 16-bit element a
// thread a step moved 2 bytes a load (GPT-2 small's residual adds, (8192, 768) bf16: 15 us each on
// an H200).
#include <cstdint>

#include "kernels/cuda/add.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/element_type.cuh"
#include "kernels/cuda/map16.cuh"
#include "lib/core/relu_formula.h"

namespace trainer::cuda {
namespace {

struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};
// relu(a + b) rounded once: relu's result is its input or a zero, so rounding the sum first and
// applying the relu to the rounded value (the separate relu kernel) gives the same bits.
struct SumRelu {
  __device__ float operator()(float a, float b) const { return relu_forward(a + b); }
};

}  // namespace

void launch_add(DType t, const void* a, const void* b, void* y, int64_t n, cudaStream_t stream, bool relu) {
  with_dtype(t, [&](auto tag) {
    if (relu)
      launch_map<decltype(tag), 2>(MapInputs<2>{{a, b}}, y, n, SumRelu{}, stream);
    else
      launch_map<decltype(tag), 2>(MapInputs<2>{{a, b}}, y, n, Sum{}, stream);
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace trainer::cuda
