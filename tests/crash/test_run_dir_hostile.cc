// What a user (or another program) may leave in a run directory, and what trainer must do with it
// (issue 30, items 8, 9, 11 and 12):
//   - a symbolic link among the run's files (metrics.csv, events.jsonl, checkpoints/) is refused:
//     a run writes nothing outside its directory;
//   - an --out holding files that no trainer run wrote is refused, and only the temporaries of
//     trainer's own files are ever removed;
//   - a checkpoint's state is checked field by field and against its weights file (epoch, step,
//     the id both files share); a missing weights file is named;
//   - summary.json after a resume reports the whole run.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/test_util.h"

using namespace trainer;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

const char* kDisc = R"(model:
  input_shape: [2]
  layers: [{type: dense, units: 16}, {type: relu}, {type: dense, units: 2}]
loss: {type: sparse_categorical_crossentropy, from_logits: true}
optimizer: {type: adam, lr: 0.01}
data: {train: {format: disc, samples: 300, seed: 3}, num_classes: 2, batch_size: 50, validation_split: 0.2}
checkpoint: {keep_last: 0}
train: {epochs: 3, seed: 7}
)";

// A run of kDisc in dir/good, made once per test.
std::string good_run(const std::string& dir, const std::string& cfg) {
  auto r = test::run_trainer("fit " + cfg + " --out " + dir + "/good");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  return dir + "/good";
}

std::string copy_run(const std::string& from, const std::string& to) {
  fs::copy(from, to, fs::copy_options::recursive);
  return to;
}

// The trainer.state JSON of a state file, and the file rewritten with another one.
nlohmann::json read_state(const std::string& path) {
  const std::string bytes = test::slurp(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  return nlohmann::json::parse(
      nlohmann::json::parse(bytes.substr(8, n))["__metadata__"]["trainer.state"].get<std::string>());
}

void write_state(const std::string& path, const nlohmann::json& state) {
  const std::string bytes = test::slurp(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  header["__metadata__"]["trainer.state"] = state.dump();
  std::string text = header.dump();
  while (text.size() % 8) text += ' ';
  const uint64_t m = text.size();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(&m), 8);
  out << text << bytes.substr(8 + n);
}

// A pid that no process has now: a child that has exited and been reaped.
pid_t dead_pid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return pid;
}

size_t files_in(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.is_regular_file() ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("a symbolic link among a run's files is refused and nothing outside the run is written",
          "[run_dir][crash]") {
  const std::string dir = test::temp_dir("run_links");
  const std::string cfg = test::write_file(dir, "disc.yaml", kDisc);
  const std::string good = good_run(dir, cfg);
  const std::string victim = test::write_file(dir, "victim.txt", "precious\n");

  for (const std::string name : {"metrics.csv", "events.jsonl"}) {
    SECTION(name + " is a link, --resume") {
      const std::string run = copy_run(good, dir + "/resume_link");
      fs::remove(run + "/" + name);
      fs::create_symlink(victim, run + "/" + name);
      auto r = test::run_trainer("fit " + cfg + " --resume " + run + " --epochs 4");
      REQUIRE(r.exit_code == 4);
      REQUIRE_THAT(r.err, Contains(run + "/" + name + " is a symbolic link"));
      REQUIRE(test::slurp(victim) == "precious\n");
    }
    SECTION(name + " is a link, --out over an unfinished run") {
      const std::string run = dir + "/out_link";
      fs::create_directories(run);
      test::write_file(run, "run.lock", "");
      fs::create_symlink(victim, run + "/" + name);
      auto r = test::run_trainer("fit " + cfg + " --out " + run);
      REQUIRE(r.exit_code == 4);
      REQUIRE_THAT(r.err, Contains("is a symbolic link"));
      REQUIRE(test::slurp(victim) == "precious\n");
    }
  }
  SECTION("checkpoints/ is a link: --resume neither writes into its target nor prunes it") {
    const std::string run = copy_run(good, dir + "/ckpt_link");
    const std::string elsewhere = dir + "/elsewhere";
    fs::rename(run + "/checkpoints", elsewhere);
    fs::create_symlink(elsewhere, run + "/checkpoints");
    const size_t before = files_in(elsewhere);
    auto r =
        test::run_trainer("fit " + cfg + " --resume " + run + " --epochs 5 --set checkpoint.keep_last=1");
    REQUIRE(r.exit_code == 4);
    REQUIRE_THAT(r.err, Contains(run + "/checkpoints is a symbolic link"));
    REQUIRE(files_in(elsewhere) == before);
  }
  SECTION("metrics.csv is a directory on --resume: a data error, not a filesystem exception") {
    const std::string run = copy_run(good, dir + "/csv_dir");
    fs::remove(run + "/metrics.csv");
    fs::create_directories(run + "/metrics.csv");
    auto r = test::run_trainer("fit " + cfg + " --resume " + run + " --epochs 4");
    REQUIRE(r.exit_code == 4);
    REQUIRE_THAT(r.err, Contains("metrics.csv is a directory, not a regular file"));
    REQUIRE_THAT(r.err, !Contains("internal error"));
  }
}

TEST_CASE("an --out holding files no trainer run wrote is refused; only trainer's temporaries are removed",
          "[run_dir][crash]") {
  const std::string dir = test::temp_dir("run_foreign");
  SECTION("the user's own config.yaml as the config and the --out") {
    const std::string mine = dir + "/mine";
    fs::create_directories(mine);
    const std::string text = std::string("# my notes on this config\n") + kDisc;
    const std::string cfg = test::write_file(mine, "config.yaml", text);
    auto r = test::run_trainer("fit " + cfg + " --out " + mine);
    REQUIRE(r.exit_code == 2);
    REQUIRE_THAT(r.err, Contains("--out " + mine + " is not empty and no trainer run has used it"));
    REQUIRE(test::slurp(cfg) == text);
    REQUIRE_FALSE(fs::exists(mine + "/run.lock"));
  }
  SECTION("a file of the user's beside a killed run's files") {
    const std::string cfg = test::write_file(dir, "disc.yaml", kDisc);
    const std::string run = dir + "/run";
    fs::create_directories(run + "/checkpoints");
    test::write_file(run, "run.lock", "");
    const std::string notes = test::write_file(run, "notes.tmp-" + std::to_string(dead_pid()), "mine");
    auto r = test::run_trainer("fit " + cfg + " --out " + run);
    REQUIRE(r.exit_code == 2);
    REQUIRE_THAT(r.err,
                 Contains("holds files that no trainer run wrote (" + fs::path(notes).filename().string()));
    REQUIRE(fs::exists(notes));
  }
  SECTION("--resume removes a killed run's temporaries and keeps the user's files of that naming") {
    const std::string cfg = test::write_file(dir, "disc.yaml", kDisc);
    const std::string good = good_run(dir, cfg);
    const std::string pid = std::to_string(dead_pid());
    const std::string notes = test::write_file(good, "notes.tmp-" + pid, "mine");
    const std::string ckpt_notes = test::write_file(good + "/checkpoints", "plan.tmp-" + pid, "mine");
    const std::string stale = test::write_file(good, "summary.json.tmp-" + pid, "partial");
    const std::string stale_ck =
        test::write_file(good + "/checkpoints", "epoch-0004.safetensors.tmp-" + pid, "x");
    auto r = test::run_trainer("fit " + cfg + " --resume " + good + " --epochs 4");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    REQUIRE(fs::exists(notes));
    REQUIRE(fs::exists(ckpt_notes));
    REQUIRE_FALSE(fs::exists(stale));
    REQUIRE_FALSE(fs::exists(stale_ck));
    REQUIRE_THAT(r.err, Contains("removed 2 temporary file(s)"));
  }
}

TEST_CASE("a checkpoint's state is checked field by field and against its weights file",
          "[checkpoint][crash]") {
  const std::string dir = test::temp_dir("state_checks");
  const std::string cfg = test::write_file(dir, "disc.yaml", kDisc);
  const std::string good = good_run(dir, cfg);
  const std::string ck = "/checkpoints/epoch-0003";
  struct Case {
    const char* name;
    std::function<void(nlohmann::json&)> edit;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"negative epochs_done", [](nlohmann::json& s) { s["epochs_done"] = -5; }, "'epochs_done' is -5"},
      {"negative step", [](nlohmann::json& s) { s["step"] = -1; }, "'step' is -1"},
      {"a string for a number", [](nlohmann::json& s) { s["step"] = "12"; },
       "'step' is \"12\", not an integer"},
      {"a string in the schedule's record", [](nlohmann::json& s) { s["schedule"]["current_lr"] = "fast"; },
       "schedule, early-stopping or best record is damaged"},
      {"zero batch size", [](nlohmann::json& s) { s["batch_size"] = 0; }, "'batch_size' is 0"},
      {"zero CPU threads", [](nlohmann::json& s) { s["cpu_threads"] = 0; }, "'cpu_threads' is 0"},
      {"a million CPU threads", [](nlohmann::json& s) { s["cpu_threads"] = 1000000; },
       "'cpu_threads' is 1000000, above 4096"},
      {"the state of another epoch", [](nlohmann::json& s) { s["epochs_done"] = 2; },
       "do not belong together"},
      {"another checkpoint's id", [](nlohmann::json& s) { s["checkpoint_id"] = "0123456789abcdef"; },
       "checkpoint id"},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const std::string run = copy_run(good, dir + "/edited");
      nlohmann::json state = read_state(run + ck + ".state.safetensors");
      c.edit(state);
      write_state(run + ck + ".state.safetensors", state);
      auto r = test::run_trainer("fit " + cfg + " --resume " + run + " --epochs 4");
      INFO(r.err);
      REQUIRE(r.exit_code == 4);
      REQUIRE_THAT(r.err, Contains(run + ck + ".state.safetensors") && Contains(c.message));
      REQUIRE_THAT(r.err, !Contains("internal error"));
    }
  }
  SECTION("an epoch-1 weights file renamed to epoch 3") {
    const std::string run = copy_run(good, dir + "/renamed");
    fs::copy_file(run + "/checkpoints/epoch-0001.safetensors", run + ck + ".safetensors",
                  fs::copy_options::overwrite_existing);
    auto r = test::run_trainer("fit " + cfg + " --resume " + run + " --epochs 4");
    REQUIRE(r.exit_code == 4);
    REQUIRE_THAT(
        r.err, Contains("do not belong together: the weights are of epoch 1, step 5, the state of epoch 3"));
  }
  SECTION("a deleted weights file is named, never skipped") {
    const std::string run = copy_run(good, dir + "/deleted");
    fs::remove(run + ck + ".safetensors");
    auto r = test::run_trainer("fit " + cfg + " --resume " + run + " --epochs 4");
    REQUIRE(r.exit_code == 4);
    REQUIRE_THAT(r.err, Contains("its weights file " + run + ck + ".safetensors is missing"));
  }
  SECTION("the untouched run still resumes") {
    auto r = test::run_trainer("fit " + cfg + " --resume " + good + " --epochs 4");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
  }
}

TEST_CASE("summary.json after --resume reports the whole run", "[run_dir][crash]") {
  const std::string dir = test::temp_dir("resume_summary");
  const std::string cfg = test::write_file(dir, "disc.yaml", kDisc);
  const std::string good = good_run(dir, cfg);
  const nlohmann::json first = nlohmann::json::parse(test::slurp(good + "/summary.json"));
  REQUIRE(first["best_val_accuracy"].get<double>() > 0.5);
  REQUIRE(first["final_lr"].get<double>() > 0);

  SECTION("a resume with nothing left to train keeps the run's values") {
    auto r = test::run_trainer("fit " + cfg + " --resume " + good);
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    const nlohmann::json again = nlohmann::json::parse(test::slurp(good + "/summary.json"));
    REQUIRE(again["status"] == "already_complete");
    REQUIRE(again["best_val_accuracy"] == first["best_val_accuracy"]);
    REQUIRE(again["final_lr"] == first["final_lr"]);
  }
  SECTION("a resumed run's best validation accuracy is the best of every epoch") {
    auto r = test::run_trainer("fit " + cfg + " --resume " + good + " --epochs 5 --set optimizer.lr=1e-7");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    double best = -1;
    std::istringstream csv(test::slurp(good + "/metrics.csv"));
    std::string line;
    std::getline(csv, line);
    REQUIRE(line == "epoch,loss,accuracy,val_loss,val_accuracy,lr,seconds");
    int rows = 0;
    while (std::getline(csv, line)) {
      std::vector<std::string> cells;
      std::stringstream row(line);
      for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
      best = std::max(best, std::stod(cells.at(4)));
      ++rows;
    }
    REQUIRE(rows == 5);
    const nlohmann::json after = nlohmann::json::parse(test::slurp(good + "/summary.json"));
    REQUIRE(after["best_val_accuracy"].get<double>() == Approx(best));
    REQUIRE(after["best_val_accuracy"].get<double>() >= first["best_val_accuracy"].get<double>());
  }
}

TEST_CASE("a resume that cannot take its checkpoint's CPU thread count says so and trains",
          "[checkpoint][crash]") {
  const std::string dir = test::temp_dir("resume_thread_notes");
  const std::string cfg = test::write_file(dir, "disc.yaml", kDisc);
  const std::string good = good_run(dir, cfg);
  const std::string ck = "/checkpoints/epoch-0003.state.safetensors";
  SECTION("more threads than this machine's usable cores (a checkpoint from a bigger machine)") {
    const std::string run = copy_run(good, dir + "/bigger");
    nlohmann::json state = read_state(run + ck);
    state["cpu_threads"] = 4096;
    write_state(run + ck, state);
    auto r = test::run_trainer("fit " + cfg + " --resume " + run + " --epochs 4");
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    REQUIRE_THAT(r.err, Contains("the checkpoint was trained with 4096 CPU threads, this process may use") &&
                            Contains("may differ in the last bits"));
  }
  SECTION("--threads other than the checkpoint's") {
    const std::string run = copy_run(good, dir + "/asked");
    const int64_t saved = read_state(run + ck).value("cpu_threads", int64_t(0));
    REQUIRE(saved >= 1);
    const int64_t asked = saved == 1 ? 2 : 1;
    auto r = test::run_trainer("fit " + cfg + " --resume " + run + " --epochs 4 --threads " +
                               std::to_string(asked));
    INFO(r.err);
    REQUIRE(r.exit_code == 0);
    REQUIRE_THAT(r.err,
                 Contains(std::to_string(asked) + " CPU threads as asked, the checkpoint was trained with " +
                          std::to_string(saved)));
  }
}
