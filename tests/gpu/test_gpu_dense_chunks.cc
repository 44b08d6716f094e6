// The padded products of a large 16-bit dense layer (dense_cuda.cc) run in chunks of rows when the
// padded buffer would pass its cap: with the cap lowered to 1 MiB, the conformance table's dense
// cases whose rows are padded (1,027 and 50,257 units) run their products in several chunks, dW
// adding the chunks' shares, and meet the same bounds against the f32 run as in one chunk.
#include <catch2/catch.hpp>

#include "kernels/cuda/cuda_kernels.h"
#include "tests/conformance/conformance_table.h"
#include "tests/conformance/harness.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;

TEST_CASE("gpu dense layers with padded rows run their products in chunks", "[gpu][dense][conformance]") {
  size_t& cap = cuda::dense_pad_chunk_bytes();
  const size_t before = cap;
  cap = size_t(1) << 20;  // 1,024 rows of 1,032 bf16: 4 chunks of 256; of 50,264: 128 of 8
  int ran = 0;
  for (const conformance::Row& row : conformance::conformance_table()) {
    if (row.type != "dense" || row.dtype == DType::f32 ||
        !cuda_backend().supports_math(row.dtype == DType::bf16 ? MathMode::bf16 : MathMode::fp16))
      continue;
    for (const conformance::Case& c : row.cases) {
      if (c.yaml.find("units: 1027") == std::string::npos && c.yaml.find("units: 50257") == std::string::npos)
        continue;
      INFO(c.yaml << " " << dtype_name(row.dtype));
      conformance::run_case(row, c, cuda_backend(), &conformance::cpu_backend());
      ++ran;
    }
  }
  cap = before;
  CHECK(ran >= 2);
}
