// The loss over every position of a sequence (LossSpec::positions > 1): PyTorch's cross_entropy
// on the flattened positions with ignore_index, against a float64 reference and finite
// differences; its metric sums; the config checks; and a character-level model on format text
// that learns.
#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>

#include "kernels/cpu/cpu_backend.h"
#include "lib/checkpoint/safetensors.h"
#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/train/evaluate.h"
#include "lib/train/fit.h"
#include "lib/train/generate.h"
#include "tests/test_loss.h"
#include "tests/test_util.h"
#include "tests/text_model.h"

using namespace trainer;

namespace {

// The mean over the labels that are not `ignore` of -log softmax(row)[label], in long double.
long double reference(const std::vector<float>& out, const std::vector<int32_t>& y, int64_t C,
                      int32_t ignore) {
  long double total = 0;
  int64_t n = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    if (y[i] == ignore) continue;
    const float* o = out.data() + i * size_t(C);
    long double mx = o[0], z = 0;
    for (int64_t c = 0; c < C; ++c) mx = std::max(mx, (long double)o[c]);
    for (int64_t c = 0; c < C; ++c) z += std::exp((long double)o[c] - mx);
    total += mx + std::log(z) - o[y[i]];
    ++n;
  }
  return n ? total / n : 0;
}

LossSpec token_spec(const std::string& yaml, int64_t C, int64_t positions) {
  LossConfig c = loss_config(yaml);
  c.positions = positions;
  return c.spec(C);
}

}  // namespace

TEST_CASE(
    "the loss over positions is the mean over the labels kept, and its gradient matches finite differences",
    "[loss][tokens][gradient]") {
  const int64_t B = 3, P = 5, C = 7;
  CpuBackend be;
  for (const std::string yaml : {"cross_entropy", "{type: cross_entropy, ignore_index: 3}",
                                 "{type: sparse_categorical_crossentropy, from_logits: true}"}) {
    INFO(yaml);
    const int32_t ignore = yaml.find("ignore_index: 3") != std::string::npos ? 3 : -100;
    std::vector<float> out = test::random_vector(size_t(B * P * C), 7, -3.f, 3.f);
    std::vector<int32_t> y;
    for (int64_t i = 0; i < B * P; ++i) y.push_back(int32_t((i * 5 + 1) % C));
    y[4] = y[9] = -100;  // PyTorch's default ignore_index
    if (ignore == -100) REQUIRE(std::count(y.begin(), y.end(), -100) == 2);
    test::TestLoss loss(be, token_spec(yaml, C, P), B);
    REQUIRE(loss.spec().metric_floats() == 2);
    if (ignore != -100) y[4] = y[9] = 0;  // valid labels; the 3s are ignored instead
    std::vector<float> dout(out.size()), sums(2, 0.f);
    float sum = 0;
    loss.run(out.data(), y.data(), B, dout.data(), &sum, sums.data(), true);
    const long double ref = reference(out, y, C, ignore);
    REQUIRE(double(sum) / B == Approx(double(ref)).epsilon(1e-6));
    int64_t kept = 0, hits = 0;
    for (size_t i = 0; i < y.size(); ++i) {
      if (y[i] == ignore) {
        for (int64_t c = 0; c < C; ++c) REQUIRE(dout[i * size_t(C) + size_t(c)] == 0.f);
        continue;
      }
      ++kept;
      const float* o = out.data() + i * size_t(C);
      hits += std::max_element(o, o + C) - o == y[i];
    }
    REQUIRE(sums[0] == float(hits));
    REQUIRE(sums[1] == float(kept));
    for (size_t i = 0; i < out.size(); ++i) {
      const float h = 1e-3f;
      auto up = out, down = out;
      up[i] += h;
      down[i] -= h;
      const double numeric = double(reference(up, y, C, ignore) - reference(down, y, C, ignore)) /
                             (double(up[i]) - double(down[i]));
      INFO("element " << i);
      REQUIRE(std::abs(double(dout[i]) - numeric) <= 1e-4 + 1e-3 * std::abs(numeric));
    }
  }
}

TEST_CASE("a batch whose labels are all ignored adds nothing", "[loss][tokens]") {
  CpuBackend be;
  test::TestLoss loss(be, token_spec("cross_entropy", 4, 2), 1);
  const std::vector<float> out(8, 0.5f);
  const std::vector<int32_t> y{-100, -100};
  std::vector<float> dout(8, 1.f), sums(2, 0.f);
  float sum = 0;
  loss.run(out.data(), y.data(), 1, dout.data(), &sum, sums.data(), true);
  REQUIRE(sum == 0.f);
  REQUIRE(sums == std::vector<float>{0.f, 0.f});
  REQUIRE(std::all_of(dout.begin(), dout.end(), [](float v) { return v == 0.f; }));
}

namespace {

using test::kTextModel;

std::string write_text(const std::string& dir) { return test::write_sentences(dir + "/corpus.txt"); }

}  // namespace

TEST_CASE("a character-level model on format text learns the next byte", "[fit][tokens][e2e]") {
  const std::string dir = test::temp_dir("text_fit");
  const std::string path = write_text(dir);
  const std::string yaml = kTextModel + test::text_data(path);
  Config cfg = parse_config(yaml, "lm.yaml", {});
  REQUIRE(cfg.loss_config.positions == 16);
  REQUIRE(cfg.loss_config.task(256) == Task::tokens);
  REQUIRE(cfg.metrics.size() == 2);  // accuracy, perplexity by default
  std::ostringstream out;
  FitOptions fo;
  fo.out_dir = dir + "/run";
  const FitResult r = fit(cfg, fo, out);
  INFO(out.str());
  REQUIRE(r.epochs_run == 4);
  // Chance is log(256) = 5.55; the text repeats a 45-byte sentence.
  REQUIRE(r.final_val_loss < 1.5);
  REQUIRE(r.final_val_accuracy > 0.6);
  REQUIRE(out.str().find("val_perplexity=") != std::string::npos);

  // generate from the run: greedy continues the sentence; a seed gives the same draws again.
  const Config run_cfg = load_config(fo.out_dir + "/config.yaml", {});
  GenerateOptions go;
  go.weights = fo.out_dir;
  go.prompt = "the quick brown fox jumps over the lazy";
  go.tokens = 12;
  go.temperature = 0;
  std::ostringstream greedy;
  const std::vector<int32_t> g = generate_tokens(run_cfg, go, greedy);
  REQUIRE(g.size() == 12);
  INFO("greedy: [" << greedy.str() << "]");
  REQUIRE(greedy.str().size() == 12);
  REQUIRE(greedy.str().substr(0, 5) == " dog.");
  go.temperature = 1;
  go.top_k = 5;
  go.seed = 7;
  std::ostringstream a, b;
  REQUIRE(generate_tokens(run_cfg, go, a) == generate_tokens(run_cfg, go, b));
  REQUIRE(a.str() == b.str());
  // predict refuses a model of positions, and says what to use.
  PredictOptions po;
  po.weights = fo.out_dir;
  po.input = path;
  po.output = dir + "/p.csv";
  REQUIRE_THROWS_WITH(predict_file(run_cfg, po, out), Catch::Contains("trainer generate"));
}

// GPT-2's tying (tie_to): the output layer reads the embedding's table. The model learns as the
// untied one does, the checkpoint holds the table once under the embedding's name, and a run
// reloaded from it generates.
TEST_CASE("a language model whose output layer reads the embedding's table trains and saves it once",
          "[fit][tokens][tie]") {
  const std::string dir = test::temp_dir("text_tied");
  const std::string path = write_text(dir);
  const std::string yaml = test::tied_text_model() + test::text_data(path);
  std::ostringstream out;
  FitOptions fo;
  fo.out_dir = dir + "/run";
  const FitResult r = fit(parse_config(yaml, "lm.yaml", {}), fo, out);
  INFO(out.str());
  REQUIRE(r.final_val_loss < 1.5);
  REQUIRE(r.params == 256 * 32 + 16 * 32 + 2 * 2 * 32 + 4 * 32 * 32 + 4 * 32 + 256);  // no lm_head.weight
  const SafetensorsFile f = read_safetensors(fo.out_dir + "/model.safetensors");
  CHECK(f.tensors.count("embedding_1.weight") == 1);
  CHECK(f.tensors.count("lm_head.weight") == 0);
  CHECK(f.tensors.count("lm_head.bias") == 1);
  GenerateOptions go;
  go.weights = fo.out_dir;
  go.prompt = "the quick brown fox jumps over the lazy";
  go.tokens = 5;
  go.temperature = 0;
  std::ostringstream greedy;
  generate_tokens(load_config(fo.out_dir + "/config.yaml", {}), go, greedy);
  CHECK(greedy.str() == " dog.");
}

TEST_CASE("sample_token: greedy, top-k and the softmax's shares", "[tokens][generate]") {
  const std::vector<float> logits{0.f, 2.f, 1.f, 2.f};
  REQUIRE(sample_token(logits.data(), 4, 0.0, 0, 0.99) == 1);  // the first of the tied largest
  REQUIRE(sample_token(logits.data(), 4, 1.0, 1, 0.99) == 1);  // top-1 is greedy
  // top-2 keeps ids 1 and 3 with equal shares: u below 0.5 takes 1, above takes 3.
  REQUIRE(sample_token(logits.data(), 4, 1.0, 2, 0.49) == 1);
  REQUIRE(sample_token(logits.data(), 4, 1.0, 2, 0.51) == 3);
  // Without top-k the shares are softmax(logits): id 0 holds 1 / (1 + 2e^2 + e) of the mass, first.
  const double p0 = 1.0 / (1.0 + 2.0 * std::exp(2.0) + std::exp(1.0));
  REQUIRE(sample_token(logits.data(), 4, 1.0, 0, p0 * 0.99) == 0);
  REQUIRE(sample_token(logits.data(), 4, 1.0, 0, p0 * 1.01) == 1);
}

TEST_CASE("a loss over positions names what it needs", "[config][tokens]") {
  const std::string dir = test::temp_dir("text_cfg");
  const std::string path = write_text(dir);
  const std::string data = "data: {train: {format: text, path: " + path + ", context: 16}, batch_size: 8}\n";
  auto fit_text = [&](const std::string& yaml) {
    std::ostringstream out;
    return fit(parse_config(yaml, "lm.yaml", {}), FitOptions{}, out);
  };
  SECTION("an output of one class row") {
    std::string y = kTextModel + data;
    y.replace(y.find("    - {type: dense, units: 256, per_position: true, name: lm_head}"), 66,
              "    - {type: flatten}\n    - {type: dense, units: 256}");
    REQUIRE_THROWS_WITH(fit_text(y),
                        Catch::Contains("16 positions") && Catch::Contains("per_position: true"));
  }
  SECTION("probabilities") {
    std::string y = kTextModel + data;
    y.replace(y.find("loss: cross_entropy"), 19, "loss: sparse_categorical_crossentropy");
    REQUIRE_THROWS_WITH(fit_text(y), Catch::Contains("on probabilities") && Catch::Contains("cross_entropy"));
  }
  SECTION("a regression loss") {
    std::string y = kTextModel + data;
    y.replace(y.find("loss: cross_entropy"), 19, "loss: mse");
    REQUIRE_THROWS_AS(fit_text(y), ConfigError);
  }
  SECTION("a metric of classes") {
    std::string y = kTextModel + "metrics: [f1]\n" + data;
    REQUIRE_THROWS_WITH(parse_config(y, "lm.yaml", {}),
                        Catch::Contains("metrics.0") && Catch::Contains("perplexity"));
  }
  SECTION("a context unlike model.input_shape") {
    std::string y = kTextModel + data;
    y.replace(y.find("context: 16"), 11, "context: 12");
    REQUIRE_THROWS_WITH(fit_text(y), Catch::Contains("data.train.context is 12 tokens a sample") &&
                                         Catch::Contains("model.input_shape is (16,)"));
  }
}

TEST_CASE("a language model interrupted mid-epoch resumes bit-identically", "[fit][tokens][resume]") {
  // Untied, and with lm_head reading the embedding's table (tie_to: one tensor, one moment state).
  const bool tied = GENERATE(false, true);
  INFO((tied ? "tied" : "untied"));
  const std::string dir = test::temp_dir(tied ? "text_resume_tied" : "text_resume");
  const std::string path = write_text(dir);
  std::string yaml = (tied ? test::tied_text_model() : kTextModel) + test::text_data(path);
  yaml.replace(yaml.find("causal: true"), 12, "causal: true, dropout: 0.1");
  yaml.replace(yaml.find("epochs: 4"), 9, "epochs: 3");
  const auto run = [&](const std::string& out, const std::string& resume, int64_t stop) {
    FitOptions fo;
    fo.out_dir = out;
    fo.resume_dir = resume;
    fo.stop_after_step = stop;
    std::ostringstream log;
    return fit(parse_config(yaml, "lm.yaml", {}), fo, log);
  };
  // The loss columns of metrics.csv (epoch, loss, accuracy, perplexity and the val_ ones).
  const auto losses = [](const std::string& csv) {
    std::istringstream in(test::slurp(csv));
    std::string line, out;
    while (std::getline(in, line)) out += line.substr(0, line.rfind(',', line.rfind(',') - 1)) + "\n";
    return out;
  };
  const FitResult straight = run(dir + "/straight", "", 0);
  REQUIRE_THROWS_AS(run(dir + "/cut", "", 25), InterruptedError);  // 19 steps an epoch: mid-epoch 2
  const FitResult resumed = run("", dir + "/cut", 0);
  REQUIRE(resumed.epochs_run == 3);
  REQUIRE(resumed.steps == straight.steps);
  REQUIRE(resumed.final_val_loss == straight.final_val_loss);
  REQUIRE(losses(dir + "/cut/metrics.csv") == losses(dir + "/straight/metrics.csv"));
  REQUIRE(test::slurp(dir + "/cut/model.safetensors") == test::slurp(dir + "/straight/model.safetensors"));
}
