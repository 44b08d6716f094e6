// data.augment on the GPU (kernels/cuda/augment.cu) gives the CPU's bits (kernels/cpu/augment_cpu.cc):
// one formula, lib/core/augment_formula.h, with the seed and step read from device memory.
#include <catch2/catch.hpp>

#include "kernels/cpu/cpu_ops.h"
#include "tests/gpu/gpu_test_util.h"

using namespace trainer;
using namespace trainer::gpu_test;

TEST_CASE("gpu augment equals the CPU's, bit for bit, at several steps", "[gpu][augment]") {
  CudaBackend& be = cuda_backend();
  AugmentSpec s;
  s.channels = 3;
  s.height = 32;
  s.width = 32;
  s.crop_padding = 4;
  s.flip = true;
  for (int k = 0; k < 3; ++k) s.fill[k] = -1.5f - float(k);
  const int64_t B = 130, n = B * 3 * 32 * 32;
  const std::vector<float> x = random_vector(size_t(n), 9);
  Buffer xb(be, size_t(n) * 4), yb(be, size_t(n) * 4), sb(be, sizeof(StepScalars));
  xb.upload(x);
  const std::unique_ptr<AugmentKernel> augment = StepKernelRegistry::global().augment(be, s);
  for (uint64_t step : {uint64_t(0), uint64_t(1), uint64_t(123456789)}) {
    StepScalars sc;
    sc.seed = 77;
    sc.step = step;
    be.copy_to_device(sb.get(), &sc, sizeof sc);
    augment->run(xb.as(), yb.as(), B, sb.as<StepScalars>());
    const std::vector<float> gpu = yb.download(size_t(n));
    std::vector<float> on_cpu(static_cast<size_t>(n));
    cpu::augment(s, x.data(), on_cpu.data(), B, sc);
    INFO("step " << step);
    CHECK(gpu == on_cpu);
  }
}
