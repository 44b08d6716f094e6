// The shipped configs: parameter totals as their headers state (Keras' summaries), and each one
// trains an epoch on small data generated here in the format it reads (IDX gz, CIFAR-10 .bin,
// token-sequence text), its data paths overridden as a user would with --set. The disc MLP runs
// its full 100 epochs and must reach <= 5% training error; a small embedding + conv1d +
// batchnorm + pooling model must learn a token-presence task through the same fit loop.
#include <omp.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <sstream>

#include "lib/config/config.h"
#include "lib/core/rng.h"
#include "lib/model/model.h"
#include "lib/train/fit.h"
#include "tests/datasets/temp_files.h"
#include "tests/test_util.h"
#include "tests/warning_sink.h"

using namespace trainer;

namespace {

// These models and batches are tiny: one OpenMP thread is as fast, and it avoids libgomp's
// spin-waiting at every parallel region, which makes such runs 50-100x slower when ctest -j runs
// another multi-threaded test on the same cores (measured: 53 s instead of 0.5 s).
struct OneThread {
  int before = omp_get_max_threads();
  OneThread() { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(before); }
};

std::string config_path(const std::string& name) {
  return std::string(TRAINER_SOURCE_DIR) + "/configs/" + name;
}

int64_t params_of(const std::string& name, std::vector<std::string> sets = {}) {
  Config cfg = load_config(config_path(name), sets);
  return Model(cfg.input_shape, cfg.layers, cfg.init, cfg.file, cfg.blocks).num_params();
}

void put_be32(std::vector<uint8_t>& v, uint32_t x) {
  for (int s = 24; s >= 0; s -= 8) v.push_back(uint8_t(x >> s));
}

// MNIST-style IDX pair, gzip-compressed: n images of 28x28 bytes and n labels in [0, 10).
void write_idx_pair(const std::string& images, const std::string& labels, int n, uint64_t seed) {
  SplitMix64 rng = SplitMix64::counter(seed);
  std::vector<uint8_t> im, lb;
  put_be32(im, 0x803);
  put_be32(im, uint32_t(n));
  put_be32(im, 28);
  put_be32(im, 28);
  put_be32(lb, 0x801);
  put_be32(lb, uint32_t(n));
  for (int i = 0; i < n; ++i) {
    lb.push_back(uint8_t(rng.next_u64() % 10));
    for (int p = 0; p < 28 * 28; ++p) im.push_back(uint8_t(rng.next_u64()));
  }
  dataset_tests::write_gz(images, im);
  dataset_tests::write_gz(labels, lb);
}

// CIFAR-10 binary records: a label byte, then 3x32x32 pixel bytes.
void write_cifar(const std::string& path, int n, uint64_t seed) {
  SplitMix64 rng = SplitMix64::counter(seed);
  std::vector<uint8_t> bytes;
  for (int i = 0; i < n; ++i) {
    bytes.push_back(uint8_t(rng.next_u64() % 10));
    for (int p = 0; p < 3072; ++p) bytes.push_back(uint8_t(rng.next_u64()));
  }
  dataset_tests::write_bytes(path, bytes);
}

// Token sequences "label id id ...": lengths 5..400 (so both padding and truncation to maxlen
// 300 happen), ids 1 .. vocab-1, labels 0 .. classes-1.
void write_sequences(const std::string& path, int n, int64_t vocab, int classes, uint64_t seed) {
  SplitMix64 rng = SplitMix64::counter(seed);
  std::ostringstream s;
  for (int i = 0; i < n; ++i) {
    s << rng.next_u64() % uint64_t(classes);
    const int len = 5 + int(rng.next_u64() % 396);
    for (int t = 0; t < len; ++t) s << ' ' << 1 + rng.next_u64() % uint64_t(vocab - 1);
    s << '\n';
  }
  dataset_tests::write_text(path, s.str());
}

FitResult fit_one_epoch(const std::string& name, std::vector<std::string> sets, std::string& log) {
  sets.push_back("train.epochs=1");
  OneThread one;
  Config cfg = load_config(config_path(name), sets);
  std::ostringstream out;
  FitResult r = fit(cfg, FitOptions{}, out);
  log = out.str();
  return r;
}

}  // namespace

TEST_CASE("the shipped configs have the parameter totals their headers state", "[workloads][model]") {
  CHECK(params_of("reuters_conv1d.yaml") == 332856);
  CHECK(params_of("reuters_transformer.yaml") == 1009178);
  CHECK(params_of("reuters_lstm.yaml") == 4103726);  // nn.LSTM's two biases (Keras' LSTM has one)
  CHECK(params_of("doc_topics_lstm.yaml") == 116808);
  CHECK(params_of("gpt2_small.yaml") == 124439808);  // GPT-2's, lm_head tied to wte
  CHECK(params_of("char_lm.yaml") == 10942464);
  CHECK(params_of("cifar10_cnn.yaml") == 122570);
  CHECK(params_of("mnist_cnn.yaml") == 21840);
  CHECK(params_of("fashion_mnist_cnn.yaml") == 21840);
  CHECK(params_of("fashion_mnist_sgd.yaml") == 21840);
  CHECK(params_of("mlp_disc.yaml") == 44710);
  CHECK(params_of("mlp_disc.yaml", {"model.layers.0.depth=10"}) == 703142);
  CHECK(params_of("resnet18_cifar.yaml") == 11173962);  // as PyTorch counts the CIFAR ResNet-18
  CHECK(params_of("resnet_fashion_mnist.yaml") == 170298);
}

namespace {

// One epoch of a reuters config on generated sequences of its vocabulary and classes (`seed` and
// seed + 1 draw the training and validation files; `limit` training sequences).
FitResult fit_reuters(const std::string& config, uint64_t seed, int limit, std::string& log) {
  dataset_tests::TempDir tmp;
  const std::string dir = tmp.path("");
  write_sequences(dir + "/train.txt", 96, 30982, 46, seed);
  write_sequences(dir + "/test.txt", 40, 30982, 46, seed + 1);
  // Random labels of 46 classes: validation may lack some that training has (named in a warning).
  test::ExpectWarning classes("no validation samples", false);
  return fit_one_epoch(config,
                       {"data.train.path=" + dir + "/train.txt", "data.validation.path=" + dir + "/test.txt",
                        "data.train.limit=" + std::to_string(limit)},
                       log);
}

// One epoch ran with the config's parameter count, and both losses are numbers.
void require_one_epoch(const FitResult& r, int64_t params) {
  REQUIRE(r.epochs_run == 1);
  REQUIRE(r.params == params);
  REQUIRE(std::isfinite(r.final_train_loss));
  REQUIRE(std::isfinite(r.final_val_loss));
}

}  // namespace

TEST_CASE("reuters_conv1d trains an epoch on generated token sequences", "[workloads][fit]") {
  std::string log;
  FitResult r = fit_reuters("reuters_conv1d.yaml", 1, 80, log);
  INFO(log);
  require_one_epoch(r, 332856);
  REQUIRE(log.find("val_top5_accuracy=") != std::string::npos);
}

// The transformer beside it: embeddings of a row per position, one pre-norm block, the mean over
// the positions (global_avg_pool with channels_last), a small classifier head.
TEST_CASE("reuters_transformer trains an epoch on generated token sequences", "[workloads][fit]") {
  std::string log;
  FitResult r = fit_reuters("reuters_transformer.yaml", 3, 64, log);
  INFO(log);
  require_one_epoch(r, 1009178);
}

// The LSTM beside them: the last state of 300 steps of 128 units.
TEST_CASE("reuters_lstm trains an epoch on generated token sequences", "[workloads][fit]") {
  std::string log;
  FitResult r = fit_reuters("reuters_lstm.yaml", 5, 64, log);
  INFO(log);
  require_one_epoch(r, 4103726);
}

TEST_CASE("cifar10_cnn trains an epoch on generated CIFAR-10 binary batches", "[workloads][fit]") {
  dataset_tests::TempDir tmp;
  const std::string dir = tmp.path("");
  write_cifar(dir + "/data_batch_1.bin", 48, 3);
  write_cifar(dir + "/data_batch_2.bin", 48, 4);
  write_cifar(dir + "/test_batch.bin", 32, 5);
  std::string log;
  // Random labels: 32 validation images may lack a class (named in a warning).
  test::ExpectWarning classes("no validation samples", false);
  FitResult r =
      fit_one_epoch("cifar10_cnn.yaml",
                    {"data.train.files=[" + dir + "/data_batch_1.bin, " + dir + "/data_batch_2.bin]",
                     "data.validation.files=[" + dir + "/test_batch.bin]"},
                    log);
  INFO(log);
  REQUIRE(r.epochs_run == 1);
  REQUIRE(r.params == 122570);
  REQUIRE(std::isfinite(r.final_train_loss));
  REQUIRE(std::isfinite(r.final_val_loss));
}

TEST_CASE("mnist_cnn and the fashion_mnist configs train an epoch on generated IDX files",
          "[workloads][fit]") {
  dataset_tests::TempDir tmp;
  const std::string dir = tmp.path("");
  write_idx_pair(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz", 120, 6);
  write_idx_pair(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz", 40, 7);
  for (const char* name : {"mnist_cnn.yaml", "fashion_mnist_cnn.yaml", "fashion_mnist_sgd.yaml"}) {
    std::string log;
    // Random labels: 40 validation images may lack a class (named in a warning).
    test::ExpectWarning classes("no validation samples", false);
    FitResult r =
        fit_one_epoch(name,
                      {"data.train.images=" + dir + "/train-images-idx3-ubyte.gz",
                       "data.train.labels=" + dir + "/train-labels-idx1-ubyte.gz",
                       "data.validation.images=" + dir + "/t10k-images-idx3-ubyte.gz",
                       "data.validation.labels=" + dir + "/t10k-labels-idx1-ubyte.gz", "data.batch_size=50"},
                      log);
    INFO(name << "\n" << log);
    REQUIRE(r.epochs_run == 1);
    REQUIRE(r.params == 21840);
    REQUIRE(std::isfinite(r.final_train_loss));
    REQUIRE(std::isfinite(r.final_val_loss));
  }
}

TEST_CASE("mlp_disc (depth 8) reaches at most 5% training error in its 100 epochs", "[workloads][fit]") {
  Config cfg = load_config(config_path("mlp_disc.yaml"), {});
  REQUIRE(cfg.epochs == 100);
  OneThread one;
  std::ostringstream out;
  FitResult r = fit(cfg, FitOptions{}, out);
  INFO(out.str());
  REQUIRE(r.epochs_run == 100);
  REQUIRE(r.final_train_accuracy >= 0.95);
}

TEST_CASE("embedding, conv1d, batchnorm and pooling learn a token-presence task through fit",
          "[workloads][fit]") {
  // Label 1 when token 7 occurs in the sequence (half the samples get it at a random position).
  dataset_tests::TempDir tmp;
  SplitMix64 rng = SplitMix64::counter(11);
  std::ostringstream s;
  for (int i = 0; i < 400; ++i) {
    const int label = i % 2;
    std::vector<uint64_t> seq(12 + rng.next_u64() % 9);
    for (auto& t : seq) do
        t = 1 + rng.next_u64() % 49;
      while (t == 7);
    if (label) seq[rng.next_u64() % seq.size()] = 7;
    s << label;
    for (uint64_t t : seq) s << ' ' << t;
    s << '\n';
  }
  dataset_tests::write_text(tmp.path("seq.txt"), s.str());
  const std::string yaml = R"(model:
  input_shape: [20]
  layers:
    - {type: embedding, input_dim: 50, output_dim: 8}
    - {type: conv1d, filters: 16, kernel_size: 3, padding: same}
    - {type: batchnorm}
    - {type: relu}
    - {type: maxpool1d, pool_size: 2}
    - {type: global_avg_pool}
    - {type: dense, units: 2}
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: adam, lr: 0.01}
data: {train: {format: sequences, path: )" +
                           tmp.path("seq.txt") +
                           R"(, maxlen: 20}, num_classes: 2, batch_size: 32, validation_split: 0.25}
train: {epochs: 15, seed: 2}
)";
  Config cfg = parse_config(yaml, "presence.yaml", {});
  OneThread one;
  std::ostringstream out;
  FitResult r = fit(cfg, FitOptions{}, out);
  INFO(out.str());
  REQUIRE(r.final_train_accuracy >= 0.9);
  REQUIRE(r.final_val_accuracy >= 0.85);  // eval mode: batchnorm's running statistics
}
