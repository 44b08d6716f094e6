// Checkpoints: the safetensors layout (checked by an independent reader), atomic writes that
// survive a failure midway, bit-identical resume on the CPU (after whole epochs and after an
// interrupt mid-epoch), a changed model refused, and eval/predict reading weights back.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "datasets/disc_generator.h"
#include "datasets/npy_reader.h"
#include "datasets/split.h"
#include "lib/checkpoint/atomic_file.h"
#include "lib/checkpoint/safetensors.h"
#include "lib/config/config.h"
#include "lib/core/error.h"
#include "lib/core/usable_cores.h"
#include "lib/train/checkpointing.h"
#include "lib/train/fit.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// 400 disc samples: 320 train (10 steps of 32), 80 validation. Dense widths keep each weight a
// multiple of 64 floats.
const char* kDisc = R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 32}, {type: relu}, {type: dropout, rate: 0.25}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: adam, lr: 0.01}
data: {train: {format: disc, samples: 400, seed: 3}, num_classes: 2, batch_size: 32, validation_split: 0.2}
train: {epochs: 4, seed: 7}
)";

// Odd tensor sizes (biases not 64-float aligned), conv2d, dropout2d and AdamW.
const char* kConv = R"(model:
  input_shape: [1, 6, 6]
  layers: [{type: conv2d, filters: 3, kernel_size: 3}, {type: relu}, {type: dropout2d, rate: 0.2}, {type: flatten},
           {type: dense, units: 13}, {type: relu}, {type: dense, units: 3}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: adamw, lr: 0.01}
data: {train: {format: random, samples: 300, seed: 2}, num_classes: 3, batch_size: 32, validation_split: 0.2}
train: {epochs: 4, seed: 9}
)";

// The tensor bytes of a safetensors file (everything after the header).
std::string tensor_bytes(const std::string& path) {
  std::string b = test::slurp(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(b[size_t(i)]);
  return b.substr(8 + n);
}

// The loss columns of metrics.csv (drops the lr and seconds columns).
std::string losses(const std::string& csv) {
  std::istringstream in(test::slurp(csv));
  std::string line, out;
  while (std::getline(in, line)) out += line.substr(0, line.rfind(',', line.rfind(',') - 1)) + "\n";
  return out;
}

// threads: --threads (0: the default, which follows the machine's load).
FitResult run_fit(const std::string& yaml, const std::vector<std::string>& sets, const std::string& out_dir,
                  const std::string& resume_dir = "", int64_t stop_after = 0, int threads = 0) {
  Config cfg = parse_config(yaml, "disc.yaml", sets);
  FitOptions fo;
  fo.device.threads = threads;
  fo.out_dir = out_dir;
  fo.resume_dir = resume_dir;
  fo.stop_after_step = stop_after;
  std::ostringstream out;
  return fit(cfg, fo, out);
}

}  // namespace

TEST_CASE("safetensors files have the documented layout, read by an independent parser", "[checkpoint]") {
  std::string dir = test::temp_dir("st_layout");
  std::vector<float> a{1.5f, -2.f, 3.25f, 0.f, 7.f, 8.f}, b{42.f};
  write_safetensors(dir + "/t.safetensors",
                    {{"layer.weight", {2, 3}, a.data()}, {"layer.bias", {1}, b.data()}},
                    {{"epoch", "3"}, {"note", "hello"}});
  const std::string bytes = test::slurp(dir + "/t.safetensors");
  REQUIRE(bytes.size() >= 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[size_t(i)]);
  REQUIRE(n % 8 == 0);  // data 8-byte aligned
  REQUIRE(bytes.size() == 8 + n + 7 * sizeof(float));
  nlohmann::json h = nlohmann::json::parse(bytes.substr(8, n));
  REQUIRE(h["__metadata__"] == nlohmann::json({{"epoch", "3"}, {"note", "hello"}}));
  REQUIRE(h["layer.weight"]["dtype"] == "F32");
  REQUIRE(h["layer.weight"]["shape"] == nlohmann::json({2, 3}));
  REQUIRE(h["layer.weight"]["data_offsets"] == nlohmann::json({0, 24}));
  REQUIRE(h["layer.bias"]["shape"] == nlohmann::json({1}));
  REQUIRE(h["layer.bias"]["data_offsets"] == nlohmann::json({24, 28}));
  float back[7];
  std::memcpy(back, bytes.data() + 8 + n, sizeof back);  // little-endian host
  REQUIRE(std::vector<float>(back, back + 6) == a);
  REQUIRE(back[6] == 42.f);

  SafetensorsFile f = read_safetensors(dir + "/t.safetensors");
  REQUIRE(f.names == std::vector<std::string>{"layer.weight", "layer.bias"});
  REQUIRE(f.tensors["layer.weight"].data == a);
  REQUIRE(f.metadata.at("note") == "hello");
}

TEST_CASE("malformed safetensors files are data errors naming the problem", "[checkpoint]") {
  std::string dir = test::temp_dir("st_bad");
  auto write = [&](const std::string& name, const std::string& header, size_t data_bytes) {
    std::string b(8, '\0');
    for (int i = 0; i < 8; ++i) b[size_t(i)] = char((header.size() >> (8 * i)) & 0xff);
    b += header + std::string(data_bytes, '\0');
    std::ofstream(dir + "/" + name, std::ios::binary) << b;
    return dir + "/" + name;
  };
  REQUIRE_THROWS_WITH(read_safetensors(dir + "/missing.safetensors"), Contains("cannot open"));
  std::ofstream(dir + "/tiny", std::ios::binary) << "abc";
  REQUIRE_THROWS_AS(read_safetensors(dir + "/tiny"), DataError);
  REQUIRE_THROWS_WITH(read_safetensors(write("json", "{not json", 0)), Contains("not JSON"));
  REQUIRE_THROWS_WITH(
      read_safetensors(write("f16", R"({"w":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4)),
      Contains("dtype F16"));
  REQUIRE_THROWS_WITH(
      read_safetensors(write("hole", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8)),
      Contains("hole"));
  REQUIRE_THROWS_WITH(
      read_safetensors(write("shape", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)),
      Contains("needs 12 bytes"));
  REQUIRE_THROWS_WITH(
      read_safetensors(write("trail", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8)),
      Contains("cover 4 of the 8"));
}

TEST_CASE("a write that fails midway leaves the previous checkpoint loadable and no temporary file",
          "[checkpoint]") {
  std::string dir = test::temp_dir("atomic");
  std::vector<float> v1(100000, 1.f);
  const std::string path = dir + "/w.safetensors";
  write_safetensors(path, {{"w", {100000}, v1.data()}}, {{"epoch", "1"}});
  set_atomic_write_hook([](const std::string&, size_t written) {
    if (written > 1000) throw RuntimeError("simulated disk full");
  });
  std::vector<float> big(1 << 20, 2.f);  // 4 MiB: the hook fires between 1 MiB chunks
  REQUIRE_THROWS_WITH(write_safetensors(path, {{"w", {1 << 20}, big.data()}}, {{"epoch", "2"}}),
                      Contains("simulated disk full"));
  set_atomic_write_hook({});
  SafetensorsFile f = read_safetensors(path);
  REQUIRE(f.metadata.at("epoch") == "1");
  REQUIRE(f.tensors["w"].data == v1);
  for (const auto& e : fs::directory_iterator(dir)) REQUIRE(e.path().filename() == "w.safetensors");

  // A whole checkpoint: the state file (the commit) fails -> --resume still finds the old one.
  std::string run = test::temp_dir("atomic_run") + "/run";
  run_fit(kDisc, {"train.epochs=1"}, run);
  REQUIRE(list_checkpoints(run + "/checkpoints").size() == 1);
  set_atomic_write_hook([](const std::string& p, size_t written) {
    if (p.find("epoch-0002.state") != std::string::npos && written > 100)
      throw RuntimeError("simulated crash");
  });
  REQUIRE_THROWS_WITH(run_fit(kDisc, {"train.epochs=2"}, "", run), Contains("simulated crash"));
  set_atomic_write_hook({});
  auto cks = list_checkpoints(run + "/checkpoints");
  REQUIRE(cks.size() == 1);
  REQUIRE(cks.back().epochs_done == 1);
  FitResult r = run_fit(kDisc, {"train.epochs=2"}, "", run);  // resumes from epoch 1
  REQUIRE(r.epochs_run == 2);
}

TEST_CASE("2 epochs plus --resume to 4 give bit-identical weights to 4 epochs straight on the CPU",
          "[checkpoint][resume]") {
  // adam + dropout; nadam (host momentum product) with clipping and a step schedule; rmsprop;
  // sgd with nesterov momentum; then a conv net with odd tensor sizes.
  const std::vector<std::vector<std::string>> variants{
      {},
      {"optimizer.type=nadam", "optimizer.lr=0.005", "clip_grad_norm=0.5",
       "schedule={type: step, step_size: 1, gamma: 0.7}"},
      {"optimizer={type: rmsprop, lr: 0.003, momentum: 0.5, centered: true}",
       "schedule={type: exponential, gamma: 0.8}"},
      {"optimizer={type: sgd, lr: 0.1, momentum: 0.9, nesterov: true}"}};
  for (size_t i = 0; i <= variants.size(); ++i) {
    INFO("variant " << i);
    std::string dir = test::temp_dir("resume" + std::to_string(i));
    const char* yaml = i < variants.size() ? kDisc : kConv;
    auto sets = i < variants.size() ? variants[i] : std::vector<std::string>{};
    FitResult straight = run_fit(yaml, sets, dir + "/straight");
    auto two = sets;
    two.push_back("train.epochs=2");
    run_fit(yaml, two, dir + "/resumed");
    FitResult resumed = run_fit(yaml, sets, "", dir + "/resumed");
    REQUIRE(resumed.epochs_run == 4);
    REQUIRE(resumed.steps == straight.steps);
    REQUIRE(tensor_bytes(dir + "/resumed/model.safetensors") ==
            tensor_bytes(dir + "/straight/model.safetensors"));
    REQUIRE(losses(dir + "/resumed/metrics.csv") == losses(dir + "/straight/metrics.csv"));
  }
}

TEST_CASE("a resumed CPU run computes with the threads its checkpoint was trained with",
          "[checkpoint][resume]") {
  // oneDNN's convolution gradients depend on the thread count, and the default count follows the
  // machine's load: a run started on a busy machine and resumed on an idle one (or in a process
  // whose earlier fit left threads spinning) gave other bits. On a machine of one usable core the
  // default is that core anyway, and the comparison shows nothing new.
  if (usable_cores() < 2)
    WARN("one usable core: the default thread count cannot differ from the checkpoint's");
  std::string dir = test::temp_dir("resume_threads");
  run_fit(kConv, {}, dir + "/straight", "", 0, 1);
  run_fit(kConv, {"train.epochs=2"}, dir + "/resumed", "", 0, 1);
  REQUIRE(list_checkpoints(dir + "/resumed/checkpoints").back().cpu_threads == 1);
  FitResult resumed = run_fit(kConv, {}, "", dir + "/resumed");  // no count asked for
  REQUIRE(resumed.epochs_run == 4);
  std::istringstream events(test::slurp(dir + "/resumed/events.jsonl"));
  std::string line, resume_event;
  while (std::getline(events, line))
    if (line.find("\"event\":\"resume\"") != std::string::npos) resume_event = line;
  REQUIRE_THAT(resume_event, Contains("1 threads)"));
  REQUIRE(tensor_bytes(dir + "/resumed/model.safetensors") ==
          tensor_bytes(dir + "/straight/model.safetensors"));
  // Checkpoints the resumed run writes keep the count.
  REQUIRE(list_checkpoints(dir + "/resumed/checkpoints").back().cpu_threads == 1);
}

TEST_CASE("an interrupt mid-epoch saves a checkpoint that resumes bit-identically", "[checkpoint][resume]") {
  const std::vector<std::string> sets{"schedule={type: cosine, warmup_steps: 5, min_lr: 0.001}",
                                      "optimizer.type=nadam"};
  std::string dir = test::temp_dir("interrupt");
  run_fit(kDisc, sets, dir + "/straight");
  // Step 17 is mid-epoch 2; step 30 ends epoch 3 (the interrupt comes before its validation).
  for (int64_t stop : {17, 30}) {
    INFO("interrupted after step " << stop);
    std::string run = dir + "/run" + std::to_string(stop);
    try {
      run_fit(kDisc, sets, run, "", stop);
      FAIL("no interrupt");
    } catch (const InterruptedError& e) {
      REQUIRE_THAT(e.what(), Contains("checkpoint saved: " + run + "/checkpoints/epoch-000") &&
                                 Contains("--resume " + run));
    }
    auto cks = list_checkpoints(run + "/checkpoints");
    REQUIRE(cks.back().step == stop);
    REQUIRE(cks.back().batches_done == (stop == 17 ? 7 : 10));
    FitResult r = run_fit(kDisc, sets, "", run);
    REQUIRE(r.epochs_run == 4);
    REQUIRE(tensor_bytes(run + "/model.safetensors") == tensor_bytes(dir + "/straight/model.safetensors"));
    // The interrupted epoch's loss too: the device sums go on from the saved floats.
    REQUIRE(losses(run + "/metrics.csv") == losses(dir + "/straight/metrics.csv"));
  }
}

TEST_CASE("directories, FIFOs and truncated reads are data errors, never a hang or garbage", "[checkpoint]") {
  std::string dir = test::temp_dir("st_special");
  fs::create_directories(dir + "/x.safetensors");
  REQUIRE_THROWS_WITH(read_safetensors(dir + "/x.safetensors"),
                      Contains("is a directory, not a regular file"));
  REQUIRE_THROWS_AS(read_safetensors_metadata(dir + "/x.safetensors"), DataError);
  REQUIRE(mkfifo((dir + "/fifo.safetensors").c_str(), 0644) == 0);
  REQUIRE_THROWS_WITH(read_safetensors(dir + "/fifo.safetensors"),
                      Contains("is a FIFO (named pipe), not a regular file"));
  REQUIRE_THROWS_AS(resolve_weights(dir + "/fifo.safetensors"), DataError);

  std::string cfg = test::write_file(dir, "disc.yaml", kDisc);
  auto ev = test::run_trainer("eval " + cfg + " --weights " + dir + "/fifo.safetensors");
  REQUIRE(ev.exit_code == 4);
  REQUIRE_THAT(ev.err, Contains("is a FIFO (named pipe), not a regular file"));
  auto evd = test::run_trainer("eval " + cfg + " --weights " + dir + "/x.safetensors");
  REQUIRE(evd.exit_code == 4);
  REQUIRE_THAT(evd.err, Contains("is a directory, not a regular file"));
}

TEST_CASE("resuming from a damaged or non-regular state file is a data error (exit 4) naming it",
          "[checkpoint][resume]") {
  std::string dir = test::temp_dir("corrupt_state");
  std::string cfg = test::write_file(dir, "disc.yaml", kDisc);
  const std::string run = dir + "/run";
  run_fit(kDisc, {"train.epochs=2"}, run);
  const std::string state = run + "/checkpoints/epoch-0002.state.safetensors";
  std::string bytes = test::slurp(state);
  const size_t at = bytes.find("trainer.state");
  REQUIRE(at != std::string::npos);
  bytes.replace(at + 20, 8, "garbage!");  // inside the state's JSON string
  std::ofstream(state, std::ios::binary | std::ios::trunc) << bytes;
  auto r = test::run_trainer("fit " + cfg + " --resume " + run);
  REQUIRE(r.exit_code == 4);
  REQUIRE_THAT(r.err, Contains(state) && Contains("move the damaged checkpoint away"));

  fs::remove(state);
  REQUIRE(mkfifo(state.c_str(), 0644) == 0);
  auto fifo = test::run_trainer("fit " + cfg + " --resume " + run);
  REQUIRE(fifo.exit_code == 4);
  REQUIRE_THAT(fifo.err, Contains("is a FIFO (named pipe), not a regular file"));
}

TEST_CASE("resuming with a changed model or optimizer is a config error naming the difference",
          "[checkpoint][resume]") {
  std::string run = test::temp_dir("changed") + "/run";
  run_fit(kDisc, {"train.epochs=1"}, run);
  REQUIRE_THROWS_MATCHES(
      run_fit(kDisc, {"model.layers.0.units=64"}, "", run), ConfigError,
      Catch::Matchers::Predicate<ConfigError>([](const ConfigError& e) {
        return std::string(e.what()).find("dense_1.weight is [64, 2] in the model but [32, 2]") !=
               std::string::npos;
      }));
  REQUIRE_THROWS_WITH(run_fit(kDisc, {"optimizer.type=sgd"}, "", run), Contains("optimizer.type adam"));
  auto cli = test::run_trainer("fit " + test::write_file(test::temp_dir("changed_cli"), "disc.yaml", kDisc) +
                               " --set model.layers.3.units=3 --set data.num_classes=3 --resume " + run);
  REQUIRE(cli.exit_code == 3);
  REQUIRE_THAT(cli.err, Contains("do not fit the model") && Contains("dense_2.weight"));
  REQUIRE(test::run_trainer("fit " + test::write_file(test::temp_dir("changed_cli"), "disc.yaml", kDisc) +
                            " --resume /nonexistent/run")
              .exit_code == 2);
}

TEST_CASE("eval and predict read trained weights back and agree with each other", "[checkpoint][cli]") {
  std::string dir = test::temp_dir("evalpredict");
  std::string cfg = test::write_file(dir, "disc.yaml", kDisc);
  auto fit_run = test::run_trainer("fit " + cfg + " --out " + dir + "/run");
  REQUIRE(fit_run.exit_code == 0);

  auto ev = test::run_trainer("eval " + cfg + " --weights " + dir + "/run --log-format json");
  REQUIRE(ev.exit_code == 0);
  nlohmann::json j = nlohmann::json::parse(ev.out);
  REQUIRE(j["event"] == "eval");
  REQUIRE(j["samples"] == 80);
  REQUIRE(j["weights"] == dir + "/run/model.safetensors");
  REQUIRE_THAT(ev.err, Contains("confusion matrix"));
  const double accuracy = j["accuracy"];
  REQUIRE(accuracy > 0.8);
  auto text = test::run_trainer("eval " + cfg + " --weights " + dir + "/run/checkpoints/best.safetensors");
  REQUIRE(text.exit_code == 0);
  REQUIRE_THAT(text.out, Contains("accuracy=") && Contains("confusion matrix"));

  // The validation part of the disc data (validation_split: 20%, stratified, seeded by train.seed)
  // as .npy and .csv.
  SplitOptions split;
  split.fraction = 0.2;
  split.seed = 7;
  const Dataset d = split_validation(make_disc(400, 3), split).validation;
  REQUIRE(d.size() == 80);
  const std::vector<float>& x = d.f32;
  write_npy_f32(dir + "/x.npy", {80, 2}, x.data());
  std::string csv = "x0,x1\n";
  char row[64];
  for (size_t i = 0; i < 80; ++i) {
    std::snprintf(row, sizeof row, "%.9g,%.9g\n", double(x[2 * i]), double(x[2 * i + 1]));
    csv += row;
  }
  test::write_file(dir, "x.csv", csv);
  auto pn = test::run_trainer("predict " + cfg + " --weights " + dir + "/run --input " + dir +
                              "/x.npy --output " + dir + "/p.npy");
  REQUIRE(pn.exit_code == 0);
  NpyArray p = read_npy(dir + "/p.npy");
  REQUIRE(p.shape == std::vector<int64_t>{80, 2});
  int correct = 0;
  for (int i = 0; i < 80; ++i) {
    REQUIRE(p.f32[size_t(2 * i)] + p.f32[size_t(2 * i + 1)] == Approx(1.0).epsilon(1e-5));
    correct += (p.f32[size_t(2 * i + 1)] > p.f32[size_t(2 * i)]) == (d.labels[size_t(i)] == 1);
  }
  REQUIRE(double(correct) / 80 == Approx(accuracy));
  auto pc = test::run_trainer("predict " + cfg + " --weights " + dir + "/run/model.safetensors --input " +
                              dir + "/x.csv --output " + dir + "/p.csv");
  REQUIRE(pc.exit_code == 0);
  std::istringstream rows(test::slurp(dir + "/p.csv"));
  std::string header, first;
  std::getline(rows, header);
  std::getline(rows, first);
  REQUIRE(header == "class_0,class_1");
  REQUIRE(std::stod(first.substr(0, first.find(','))) == Approx(p.f32[0]).epsilon(1e-4));

  // Weights of another model: config error; a missing file: usage error.
  auto other = test::run_trainer("eval " + cfg + " --set model.layers.0.units=8 --weights " + dir + "/run");
  REQUIRE(other.exit_code == 3);
  REQUIRE(test::run_trainer("eval " + cfg + " --weights " + dir + "/nothing.safetensors").exit_code == 2);
}

TEST_CASE("batchnorm's parameters are PyTorch's weight and bias; files naming them gamma and beta still load",
          "[checkpoint]") {
  Config c = parse_config(R"(model:
  input_shape: [2, 3, 3]
  layers: [{type: conv2d, filters: 2, kernel_size: 1}, {type: batchnorm, name: bn}, {type: global_avg_pool}]
data: {train: {format: random}, num_classes: 2}
)",
                          "bn.yaml", {});
  Model model(c.input_shape, c.layers, c.init, c.file);
  std::vector<std::string> names;
  for (const TensorSlot& t : model.params()) names.push_back(t.name);
  CHECK(names == std::vector<std::string>{"conv2d_1.weight", "conv2d_1.bias", "bn.weight", "bn.bias"});
  // The file an older version wrote: bn.gamma and bn.beta.
  const std::vector<float> w{1, 2, 3, 4}, b{5, 6}, gamma{7, 8}, beta{9, 10}, mean{0, 0}, var{1, 1};
  const std::string path = test::temp_dir("bn_legacy") + "/model.safetensors";
  write_safetensors(path,
                    {{"conv2d_1.weight", {2, 2, 1, 1}, w.data()},
                     {"conv2d_1.bias", {2}, b.data()},
                     {"bn.gamma", {2}, gamma.data()},
                     {"bn.beta", {2}, beta.data()},
                     {"bn.running_mean", {2}, mean.data()},
                     {"bn.running_var", {2}, var.data()}},
                    {});
  HostWeights loaded = load_weights(path, model, "--weights");
  for (const TensorSlot& t : model.params())
    if (t.name == "bn.weight")
      CHECK(loaded.params[size_t(t.offset) + 1] == 8.f);
    else if (t.name == "bn.bias")
      CHECK(loaded.params[size_t(t.offset)] == 9.f);
}
