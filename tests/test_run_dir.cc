// The run directory (config.yaml, metrics.csv, events.jsonl, checkpoints, summary.json), the
// JSON log format, --quiet, the live progress line, and plain output when stdout is no terminal.
#include <catch2/catch.hpp>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lib/train/progress.h"
#include "lib/train/run_dir.h"
#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

const char* kDisc = R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 32}, {type: relu}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: adam, lr: 0.01}
data: {train: {format: disc, samples: 400, seed: 3}, num_classes: 2, batch_size: 32, validation_split: 0.2}
train: {epochs: 4, seed: 7}
)";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// s with every `from` replaced by `to` (std::regex recursed once per character and overflowed
// the stack under ASan on long inputs).
std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// "runs/my_net-YYYYMMDD-HHMMSS": the default run directory of configs/my_net.yaml.
bool is_default_run_dir(const std::string& s) {
  const std::string head = "runs/my_net-";
  if (s.size() != head.size() + 15 || s.compare(0, head.size(), head) != 0) return false;
  for (size_t i = head.size(); i < s.size(); ++i) {
    const bool dash = i == head.size() + 8;
    if (dash ? s[i] != '-' : !std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  return true;
}

// Printable ASCII, tabs and newlines only: no "\r", no escape sequences.
bool plain_text(const std::string& s) {
  for (unsigned char c : s)
    if (c != '\n' && c != '\t' && (c < 0x20 || c == 0x7f)) return false;
  return true;
}

}  // namespace

TEST_CASE("fit --out writes the config, metrics, events, checkpoints, final weights and summary",
          "[run_dir]") {
  std::string dir = test::temp_dir("rundir");
  std::string cfg = test::write_file(dir, "disc.yaml", kDisc);
  auto r = test::run_trainer("fit " + cfg + " --out " + dir +
                             "/run --set checkpoint.keep_last=2 --set schedule=cosine");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const std::string run = dir + "/run";
  YAML::Node c = YAML::LoadFile(run + "/config.yaml");
  REQUIRE(c["checkpoint"]["keep_last"].as<int>() == 2);
  REQUIRE(c["schedule"]["type"].as<std::string>() == "cosine");
  REQUIRE(c["model"]["layers"][0]["name"].as<std::string>() == "dense_1");

  auto csv = lines_of(test::slurp(run + "/metrics.csv"));
  REQUIRE(csv.size() == 5);
  REQUIRE(csv[0] == "epoch,loss,accuracy,val_loss,val_accuracy,lr,seconds");
  REQUIRE(csv[4].rfind("4,", 0) == 0);

  std::vector<std::string> events;
  for (const auto& l : lines_of(test::slurp(run + "/events.jsonl"))) {
    nlohmann::json j = nlohmann::json::parse(l);
    REQUIRE(j.contains("time"));
    events.push_back(j["event"]);
  }
  REQUIRE(events.front() == "start");
  REQUIRE(events.back() == "end");
  REQUIRE(std::count(events.begin(), events.end(), "epoch") == 4);
  REQUIRE(std::count(events.begin(), events.end(), "checkpoint") == 4);

  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(run + "/checkpoints"))
    files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  REQUIRE(files == std::vector<std::string>{"best.safetensors", "epoch-0003.safetensors",
                                            "epoch-0003.state.safetensors", "epoch-0004.safetensors",
                                            "epoch-0004.state.safetensors"});
  REQUIRE(fs::exists(run + "/model.safetensors"));

  nlohmann::json s = nlohmann::json::parse(test::slurp(run + "/summary.json"));
  REQUIRE(s["status"] == "completed");
  REQUIRE(s["monitor"] == "val_accuracy");
  REQUIRE(s["best_epoch"].get<int>() >= 1);
  REQUIRE(s["best_value"].get<double>() > 0.5);
  REQUIRE(s["epochs_run"] == 4);
  REQUIRE(s["seconds"].get<double>() > 0);
  REQUIRE(s["peak_bytes"].get<int64_t>() > 0);
  REQUIRE_THAT(s["device"].get<std::string>(), Contains("CPU"));

  // The same --out again: refused, pointing at --resume.
  auto again = test::run_trainer("fit " + cfg + " --out " + run);
  REQUIRE(again.exit_code == 2);
  REQUIRE_THAT(again.err, Contains("--resume " + run));
  REQUIRE(test::run_trainer("fit " + cfg + " --out " + run + " --resume " + run).exit_code == 2);
}

TEST_CASE("the json log format prints one JSON object per epoch and a summary, text goes to stderr",
          "[run_dir][cli]") {
  std::string dir = test::temp_dir("json");
  std::string cfg = test::write_file(dir, "disc.yaml", kDisc);
  auto r = test::run_trainer("fit " + cfg + " --no-out --log-format json --set optimizer.lr=0.02");
  REQUIRE(r.exit_code == 0);
  auto lines = lines_of(r.out);
  REQUIRE(lines.size() == 5);
  for (int i = 0; i < 4; ++i) {
    nlohmann::json j = nlohmann::json::parse(lines[size_t(i)]);
    REQUIRE(j["event"] == "epoch");
    REQUIRE(j["epoch"] == i + 1);
    REQUIRE(j["lr"].get<double>() == Approx(0.02));
    REQUIRE(j.contains("val_accuracy"));
  }
  nlohmann::json s = nlohmann::json::parse(lines[4]);
  REQUIRE(s["event"] == "summary");
  REQUIRE(s["steps"] == 40);
  REQUIRE_THAT(r.err, Contains("epoch 4/4 loss=") && Contains("done:"));

  auto quiet = test::run_trainer("fit " + cfg + " --no-out --log-format json --quiet");
  REQUIRE(quiet.exit_code == 0);
  REQUIRE(lines_of(quiet.out).size() == 1);
  REQUIRE(nlohmann::json::parse(quiet.out)["event"] == "summary");
  REQUIRE(quiet.err.empty());
}

TEST_CASE("without a terminal stdout holds only plain lines, and --quiet only the summary line",
          "[run_dir][cli]") {
  std::string dir = test::temp_dir("plain");
  std::string cfg = test::write_file(dir, "disc.yaml", kDisc);
  auto r = test::run_trainer("fit " + cfg + " --no-out --log-every 1");
  REQUIRE(r.exit_code == 0);
  REQUIRE(plain_text(r.out));
  REQUIRE_THAT(r.out, Contains("epoch 1/4 loss=") && Contains("confusion matrix"));
  auto q = test::run_trainer("fit " + cfg + " --no-out --quiet");
  REQUIRE(q.exit_code == 0);
  auto lines = lines_of(q.out);
  REQUIRE(lines.size() == 1);
  REQUIRE_THAT(lines[0], Contains("done: best val_accuracy="));
  REQUIRE(q.err.empty());
  REQUIRE(test::run_trainer("fit " + cfg + " --no-out --log-every 0").exit_code == 2);
  REQUIRE(test::run_trainer("fit " + cfg + " --no-out --log-format xml").exit_code == 2);
}

TEST_CASE("the live progress line is redrawn in place and replaced by the epoch line", "[run_dir]") {
  ReportOptions o;
  o.live = true;
  o.log_every = 2;
  o.columns = 100;
  std::ostringstream out;
  Reporter rep(o, out);
  rep.epoch_begin(1, 3, 4, 0);
  for (int64_t step = 1; step <= 4; ++step)
    if (rep.wants_refresh(step)) rep.refresh(step, {{"loss", 0.5}, {"accuracy", 0.75}});
  rep.epoch_end("[t] epoch 1/3 loss=0.5000", Json::object());
  const std::string s = out.str();
  REQUIRE_THAT(s, Contains("\repoch 1/3      2/4 [==========>.........]") && Contains("\x1b[K"));
  REQUIRE(std::count(s.begin(), s.end(), '\r') == 3);  // steps 2 and 4, then the clear
  for (const auto& piece : lines_of(replace_all(s, "\r", "\n")))
    REQUIRE(replace_all(piece, "\x1b[K", "").size() <= 99);  // never wraps
  REQUIRE_THAT(s, Contains("\r\x1b[K[t] epoch 1/3 loss=0.5000\n"));
}

TEST_CASE("the default run directory is runs/<config name>-<date>-<time>, made unique", "[run_dir]") {
  const fs::path cwd = fs::current_path();
  fs::current_path(test::temp_dir("default_dir"));
  const std::string a = RunDir::default_path("configs/my_net.yaml");
  REQUIRE(is_default_run_dir(a));
  fs::create_directories(a);
  const std::string b = RunDir::default_path("configs/my_net.yaml");
  fs::current_path(cwd);
  REQUIRE((b == a + "-2" || is_default_run_dir(b)));
  REQUIRE(b != a);
}
