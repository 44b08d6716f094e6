// The padded products of a large 16-bit dense layer (dense_cuda.cc) run in chunks of rows when the
// padded buffer would pass its cap: with the cap lowered to 1 MiB, the conformance table's dense
// cases whose rows are padded (1,027 and 50,257 units) run their products in several chunks, dW
// adding the chunks' shares, and meet the same bounds against the f32 run as in one chunk.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kernels/cuda/cuda_kernels.h"
#include "lib/config/config.h"
#include "lib/train/fit.h"
#include "lib/train/generate.h"
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

// A 16-bit language-model head of a vocabulary whose rows are not 16-byte multiples (1,001 bf16)
// that the token loss alone reads: its rows stay padded in the model's output and the loss reads
// them at that pitch (KernelContext::output_pitch_ok, LossRun::pitch), with no copies. The same
// model with an identity view after the head (which keeps the rows packed: copied from and into
// the padded buffer) trains to the same bits, and both come near the CPU's fp32 run; greedy
// generation from the padded run reads its logits through predict's unpadding.
TEST_CASE("gpu padded language-model rows read by the loss at their pitch train as copied rows",
          "[gpu][dense][tokens]") {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("trainer_gpu_pitch_" + std::to_string(::getpid()) + ".bin"))
          .string();
  {  // 40,000 ids with a rule to learn: each id follows from the one before
    std::vector<uint16_t> ids(40000);
    uint32_t v = 1;
    for (size_t i = 0; i < ids.size(); ++i) {
      v = (v * 7 + 3 + (i % 13 == 0 ? 11 : 0)) % 1001;
      ids[i] = uint16_t(v);
    }
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(ids.data()), std::streamsize(ids.size() * 2));
  }
  const std::string head = R"(model:
  input_shape: [64]
  layers:
    - {type: embedding, input_dim: 1001, output_dim: 32, channels_first: false}
    - {type: dense, units: 1001, per_position: true, use_bias: false, name: lm_head}
)";
  const std::string rest =
      "loss: cross_entropy\noptimizer: {type: adam, lr: 0.01}\ntrain: {epochs: 2, seed: 1}\n"
      "data: {train: {format: tokens, path: " +
      path + ", context: 64}, validation: {format: tokens, path: " + path +
      ", context: 64}, num_classes: 1001, batch_size: 32}\n";
  const std::string padded = head + rest;
  const std::string copied = head + "    - {type: identity, name: keep_packed}\n" + rest;
  const std::vector<std::string> bf16{"math=bf16", "low_precision_min_mflops=0"};
  FitOptions gpu, cpu;
  gpu.device.device = "gpu:0";
  gpu.device.deterministic = true;
  cpu.device.device = "cpu";
  const std::string out_dir =
      (std::filesystem::temp_directory_path() / ("trainer_gpu_pitch_run_" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove_all(out_dir);
  std::ostringstream o1, o2, o3;
  FitOptions gpu_saved = gpu;
  gpu_saved.out_dir = out_dir;
  const FitResult a = fit(parse_config(padded, "p.yaml", bf16), gpu_saved, o1);
  const FitResult b = fit(parse_config(copied, "c.yaml", bf16), gpu, o2);
  const FitResult c = fit(parse_config(padded, "p.yaml", {}), cpu, o3);
  INFO(o1.str() << o2.str() << o3.str());
  CHECK(a.final_train_loss == b.final_train_loss);
  CHECK(a.final_val_loss == b.final_val_loss);
  CHECK(a.final_val_accuracy == b.final_val_accuracy);
  CHECK(a.final_val_loss == Approx(c.final_val_loss).epsilon(0.05));
  CHECK(a.final_val_loss < 0.5 * std::log(1001.0));  // it learned
  GenerateOptions go;
  go.device.device = "gpu:0";
  go.weights = out_dir;
  go.prompt = "5 38 269";
  go.tokens = 8;
  go.temperature = 0;
  std::ostringstream text;
  const std::vector<int32_t> t = generate_tokens(load_config(out_dir + "/config.yaml", {}), go, text);
  CHECK(t.size() == 8);
  for (int32_t id : t) CHECK((id >= 0 && id < 1001));
  std::filesystem::remove(path);
  std::filesystem::remove_all(out_dir);
}
