// The loss over every position (LossSpec::positions > 1) on the GPU against the CPU: small and
// GPT-2-sized vocabularies, ignored labels, ties, two runs accumulating, a NaN caught by the guard;
// then a character-level model on format text trained on gpu:0 against the CPU.
//   dout: relative error < 1e-5 (the GPU's exp is __expf); the loss sum: relative 1e-5; the
//   counts: identical.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "lib/config/config.h"
#include "lib/core/bf16.h"
#include "lib/losses/losses.h"
#include "lib/train/fit.h"
#include "lib/train/generate.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/test_loss.h"
#include "tests/test_util.h"
#include "tests/text_model.h"

using namespace trainer;
using namespace trainer::gpu_test;

namespace {

struct Run {
  std::vector<float> dout, sums;
  float loss = 0;
  uint32_t guard = 0;
};

// bf16: the logits go to the kernel as bf16 (out rounded) and their gradient comes back as bf16,
// widened here. shift: the logits start that many elements into their buffer, so that they sit at
// another 16-byte phase than their gradient.
Run run_on(Backend& be, const std::vector<float>& out, const std::vector<int32_t>& y, int64_t B, int64_t P,
           int64_t C, bool bf16 = false, int64_t shift = 0) {
  LossConfig c = loss_config("cross_entropy");
  c.positions = P;
  test::TestLoss k(be, c.spec(C), B);
  if (bf16) REQUIRE(k.takes(DType::bf16));
  const size_t n = out.size();
  Buffer ob(be, (n + size_t(shift)) * 4), yb(be, y.size() * 4), db(be, n * 4), lb(be, 4), sb(be, 8),
      gb(be, sizeof(StepScalars));
  void* op = static_cast<char*>(ob.get()) + shift * (bf16 ? 2 : 4);
  std::vector<uint16_t> out16(n);
  for (size_t i = 0; i < n; ++i) out16[i] = bf16_from_float(out[i]);
  if (bf16)
    be.copy_to_device(op, out16.data(), n * 2);
  else
    be.copy_to_device(op, out.data(), n * 4);
  yb.upload(y);
  be.zero(lb.get(), 4);
  be.zero(sb.get(), 8);
  be.zero(gb.get(), sizeof(StepScalars));
  for (int rep = 0; rep < 2; ++rep)
    k.run_typed(bf16 ? DType::bf16 : DType::f32, op, yb.get(), B, db.get(), lb.as(), sb.as(), true,
                gb.as<StepScalars>());
  Run r;
  if (bf16) {
    std::vector<uint16_t> d16(n);
    be.copy_to_host(d16.data(), db.get(), n * 2);
    for (uint16_t v : d16) r.dout.push_back(float_from_bf16(v));
  } else {
    r.dout = db.download(n);
  }
  r.sums = sb.download(2);
  r.loss = lb.download(1)[0];
  StepScalars s;
  be.copy_to_host(&s, gb.get(), sizeof s);
  r.guard = s.nonfinite;
  return r;
}

}  // namespace

TEST_CASE("gpu runs the loss over positions as the CPU does", "[gpu][loss][tokens]") {
  struct Case {
    int64_t B, P, C;
  };
  for (const Case& cs : {Case{3, 5, 7}, Case{4, 64, 256}, Case{2, 96, 50257}}) {
    INFO("batch " << cs.B << " positions " << cs.P << " classes " << cs.C);
    std::vector<float> out = test::random_vector(size_t(cs.B * cs.P * cs.C), uint64_t(cs.C), -4.f, 4.f);
    std::vector<int32_t> y;
    for (int64_t i = 0; i < cs.B * cs.P; ++i) y.push_back(i % 7 == 3 ? -100 : int32_t((i * 131 + 7) % cs.C));
    // Ties: row 0 all equal (argmax 0), row 1 its label tied with a lower class.
    std::fill(out.begin(), out.begin() + cs.C, 0.25f);
    out[size_t(cs.C + 0)] = out[size_t(cs.C + y[1])] = 9.f;
    const Run cpu = run_on(cpu_backend(), out, y, cs.B, cs.P, cs.C),
              gpu = run_on(cuda_backend(), out, y, cs.B, cs.P, cs.C);
    CHECK(rel_error(gpu.dout, cpu.dout) < 1e-5);
    CHECK(gpu.loss == Approx(cpu.loss).epsilon(1e-5));
    CHECK(gpu.sums == cpu.sums);
    CHECK(gpu.guard == 0);
    CHECK(cpu.guard == 0);
    // bf16 logits (a bf16 model's, read as they are): the CPU's f32 loss on the same rounded
    // values, and its gradient rounded once to bf16.
    std::vector<float> rounded = out;
    for (float& v : rounded) v = round_to_bf16(v);
    const Run cpu16 = run_on(cpu_backend(), rounded, y, cs.B, cs.P, cs.C),
              gpu16 = run_on(cuda_backend(), out, y, cs.B, cs.P, cs.C, true);
    std::vector<float> want = cpu16.dout;
    for (float& v : want) v = round_to_bf16(v);
    CHECK(rel_error(gpu16.dout, want) < 2e-3);
    CHECK(gpu16.loss == Approx(cpu16.loss).epsilon(1e-5));
    CHECK(gpu16.sums == cpu16.sums);
    SECTION("a NaN logit is caught as on the CPU") {
      out[size_t(5 * cs.C + 1)] = NAN;
      const Run c2 = run_on(cpu_backend(), out, y, cs.B, cs.P, cs.C),
                g2 = run_on(cuda_backend(), out, y, cs.B, cs.P, cs.C);
      CHECK(g2.guard == uint32_t(kNonfiniteLoss));
      CHECK(c2.guard == g2.guard);
      CHECK(run_on(cuda_backend(), out, y, cs.B, cs.P, cs.C, true).guard == uint32_t(kNonfiniteLoss));
    }
  }
}

// The GPU reads and writes a row 16 bytes at a time from the row's first 16-byte boundary, with
// scalars before it and after the last whole vector. Rows of 3, 9 and 8195 classes start at every
// phase (8 in bf16, 4 in f32; 3 classes in bf16 is often shorter than the scalars before the
// boundary), with the largest logit tied in those scalars, in one vector, in a thread's vectors
// 1024 and 2048 columns apart, across threads and at the row's end: the label the first of the
// tie (a hit) or the later one (a miss), as the CPU's first index of the maximum. Also a row of
// equal logits, -0 and +0 tied as the maximum, an ignored row, the logits at another phase than
// their gradient, and a NaN before the boundary, in a vector and at the row's end.
TEST_CASE("gpu's loss over positions keeps the CPU's argmax and gradient at every row alignment",
          "[gpu][loss][tokens]") {
  for (const int64_t C : {int64_t(3), int64_t(9), int64_t(8195)}) {
    INFO("classes " << C);
    const int64_t B = 2, P = 12, rows = B * P;
    // Values that bf16 holds, so that the f32 and bf16 runs see the same numbers.
    std::vector<float> out = test::random_vector(size_t(rows * C), uint64_t(C) + 1, -4.f, 4.f);
    for (float& v : out) v = round_to_bf16(v);
    std::vector<int32_t> y(static_cast<size_t>(rows));
    float hits = 0;
    for (int64_t r = 0; r < rows; ++r) {
      float* o = out.data() + r * C;
      const int64_t ties[][2] = {{0, 1},        {1, 2},        {0, C - 1},     {r, r + 1},
                                 {r, r + 1024}, {r, r + 2048}, {C - 2, C - 1}, {2, 7},
                                 {3, 5},        {5, 8},        {6, 14},        {r * 37, r * 37 + 5}};
      int64_t a = ties[r % 12][0], b = ties[r % 12][1];
      if (b >= C) a = 0, b = C - 1;
      o[a] = o[b] = 9.f;
      y[size_t(r)] = int32_t(r % 2 == 0 ? a : b);
      if (r == 9) y[size_t(r)] = -100;
      if (r == 10) {  // all equal: the argmax is column 0
        std::fill(o, o + C, 0.5f);
        y[size_t(r)] = 1;
      }
      if (r == 11 || r == 13) {  // the maximum 0, as -0 then +0 (+0 then -0): the first is the argmax
        for (int64_t c = 0; c < C; ++c) o[c] = round_to_bf16(-1.f - std::fabs(o[c]));
        o[a] = r == 11 ? -0.f : 0.f;
        o[b] = r == 11 ? 0.f : -0.f;
        y[size_t(r)] = int32_t(a);
      }
      if (y[size_t(r)] == (r == 10 ? 0 : a)) ++hits;
    }
    const Run cpu = run_on(cpu_backend(), out, y, B, P, C);
    REQUIRE(cpu.sums[0] == 2 * hits);  // two runs: the CPU takes the first of each tie
    for (const int64_t shift : {0, 1, 3}) {
      INFO("logits " << shift << " elements into their buffer");
      const Run gpu = run_on(cuda_backend(), out, y, B, P, C, false, shift);
      CHECK(rel_error(gpu.dout, cpu.dout) < 1e-5);
      CHECK(gpu.loss == Approx(cpu.loss).epsilon(1e-5));
      CHECK(gpu.sums == cpu.sums);
      const Run gpu16 = run_on(cuda_backend(), out, y, B, P, C, true, shift);
      std::vector<float> want = cpu.dout;
      for (float& v : want) v = round_to_bf16(v);
      CHECK(rel_error(gpu16.dout, want) < 2e-3);
      CHECK(gpu16.loss == Approx(cpu.loss).epsilon(1e-5));
      CHECK(gpu16.sums == cpu.sums);
    }
    for (const int64_t r : {1, 3})
      for (const int64_t c : {int64_t(0), int64_t(2), C / 2, C - 1}) {
        INFO("NaN at row " << r << " column " << c);
        std::vector<float> bad = out;
        bad[size_t(r * C + c)] = NAN;
        CHECK(run_on(cuda_backend(), bad, y, B, P, C).guard == uint32_t(kNonfiniteLoss));
        CHECK(run_on(cuda_backend(), bad, y, B, P, C, true).guard == uint32_t(kNonfiniteLoss));
      }
  }
}

TEST_CASE("gpu trains a character-level model on format text as the CPU does", "[gpu][tokens][e2e]") {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("trainer_gpu_text_" + std::to_string(::getpid()) + ".txt"))
          .string();
  test::write_sentences(path);
  // Untied, and with lm_head reading the embedding's table (its backward adds to the gradient
  // lm_head's wrote).
  const bool tied = GENERATE(false, true);
  // The GPU in bf16 too: the loss then reads the bf16 logits as they are (LossKernel::takes).
  const bool bf16 = GENERATE(false, true);
  const std::string yaml = (tied ? test::tied_text_model() : test::kTextModel) + test::text_data(path);
  const std::vector<std::string> three_epochs{"train.epochs=3"};
  std::ostringstream o1, o2;
  FitOptions cpu, gpu;
  cpu.device.device = "cpu";
  gpu.device.device = "gpu:0";
  gpu.device.deterministic = true;
  gpu.out_dir =
      (std::filesystem::temp_directory_path() /
       ("trainer_gpu_text_run_" + std::to_string(::getpid()) + (tied ? "_tied" : "") + (bf16 ? "_bf16" : "")))
          .string();
  std::filesystem::remove_all(gpu.out_dir);
  std::vector<std::string> gpu_sets = three_epochs;
  if (bf16)
    gpu_sets.insert(gpu_sets.end(), {"math=bf16", "low_precision_min_mflops=0"});  // every layer in bf16
  const FitResult a = fit(parse_config(yaml, "t.yaml", three_epochs), cpu, o1),
                  b = fit(parse_config(yaml, "t.yaml", gpu_sets), gpu, o2);
  std::filesystem::remove(path);
  INFO((tied ? "tied" : "untied") << (bf16 ? ", bf16\n" : ", f32\n") << o1.str() << o2.str());
  CHECK(b.final_val_loss < 1.5);
  CHECK(b.final_val_loss == Approx(a.final_val_loss).epsilon(bf16 ? 0.1 : 0.05));
  CHECK(b.final_val_accuracy == Approx(a.final_val_accuracy).margin(0.05));
  // generate on the GPU from the run: greedy bytes from the sentence's 28 (a pangram, a space and
  // a full stop). In bf16 the logits stay 16-bit for the loss, and predict widens them on the host:
  // bytes read wrongly would pick any of 256.
  GenerateOptions go;
  go.device.device = "gpu:0";
  go.weights = gpu.out_dir;
  go.prompt = "the quick brown fox";
  go.tokens = 12;
  go.temperature = 0;
  std::ostringstream text;
  const std::vector<int32_t> t = generate_tokens(load_config(gpu.out_dir + "/config.yaml", {}), go, text);
  INFO("generated: [" << text.str() << "]");
  CHECK(t.size() == 12);
  CHECK(text.str().find_first_not_of("abcdefghijklmnopqrstuvwxyz. ") == std::string::npos);
  std::filesystem::remove_all(gpu.out_dir);
}
