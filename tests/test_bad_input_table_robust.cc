// Rows of the README's "Bad input" table from issue 30: inputs that crashed trainer, reached an
// internal error, named the wrong cause or got the wrong exit code. Each runs the trainer binary
// (tests/bad_input_rows.h); scripts/bad_input_table.sh prints the same rows.
#include <sys/mount.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lib/backend/backend_registry.h"
#include "tests/bad_input_rows.h"
#include "tests/test_util.h"

using namespace trainer;
using namespace trainer::test;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// A model of `depth` blocks, each using the next (b0 -> b1 -> ... -> b<depth-1>).
std::string nested_blocks(int depth) {
  std::string blocks;
  for (int i = 0; i < depth; ++i)
    blocks += "    b" + std::to_string(i) +
              ": {layers: [{type: " + (i + 1 < depth ? "b" + std::to_string(i + 1) : std::string("relu")) +
              "}]}\n";
  return replace(kTiny, "  layers:\n", "  blocks:\n" + blocks + "  layers:\n    - {type: b0}\n");
}

// A graph with one concat of `n` inputs, each a dense layer of the model input.
std::string wide_concat(int n) {
  std::string layers, names;
  for (int i = 0; i < n; ++i) {
    layers += "    - {type: dense, units: 2, name: d" + std::to_string(i) + ", inputs: [input]}\n";
    names += (i ? ", d" : "d") + std::to_string(i);
  }
  layers += "    - {type: concat, inputs: [" + names + "]}\n    - {type: dense, units: 2}\n";
  return replace(
      kTiny, "  layers:\n    - {type: dense, units: 8}\n    - {type: relu}\n    - {type: dense, units: 2}\n",
      "  layers:\n" + layers);
}

}  // namespace

TEST_CASE("bad-input table: issue 30 rows (crashes, internal errors, wrong causes and exit codes)",
          "[bad_input]") {
  const std::string dir = test::temp_dir("table_issue30");
  test::write_file(dir, "tiny.yaml", kTiny);
  test::write_file(dir, "blocks17.yaml", nested_blocks(17));
  test::write_file(dir, "blocks16.yaml", nested_blocks(16));
  test::write_file(dir, "concat65.yaml", wide_concat(65));
  test::write_file(dir, "concat64.yaml", wide_concat(64));
  test::write_file(dir, "long_type.yaml",
                   replace(kTiny, "  type: adam\n", "  type: " + std::string(5000000, 'a') + "\n"));
  test::write_file(dir, "nul.csv", std::string("a,b,label\n1,2,0\n1\0x,2,1\n", 25));
  test::write_file(dir, "csv.yaml",
                   replace(kTiny, "  train: {format: disc, samples: 200, seed: 3}\n  validation_split: 0.2\n",
                           "  train: {format: csv, path: nul.csv, label_column: label, header: true}\n"));
  REQUIRE(test::run_trainer("fit " + dir + "/tiny.yaml --epochs 1 --out " + dir + "/good").exit_code == 0);
  fs::create_directories(dir + "/out.npy");
  test::write_file(dir, "x.csv", "0.1,0.2\n0.3,0.4\n");
  const std::string deep_key = "model.blocks.b." + [] {
    std::string k;
    for (int i = 0; i < 40000; ++i) k += "x.";
    return k;
  }() + "y=1";
  check_rows(
      dir,
      {
          // 14: a --set key 40,000 levels deep segfaulted (exit 139) in has_parameter.
          {"fit tiny.yaml --no-out --set " + deep_key, 3,
           "the key has more than 64 dotted segments; a config nests at most 64 levels deep"},
          // 15: OMP_NUM_THREADS=99999 segfaulted in libgomp.
          {"fit tiny.yaml --no-out", 2,
           "OMP_NUM_THREADS='99999': each thread count must be a whole number from 1 to 4096, as --threads",
           "env OMP_NUM_THREADS=99999"},
          {"fit tiny.yaml --no-out", 2, "OMP_NUM_THREADS='8,x'", "env OMP_NUM_THREADS=8,x"},
          // 15: more threads than cores is a warning, not a silent 300x slow-down.
          {"fit tiny.yaml --no-out --epochs 1 --threads 3", 0, "warning: CPU: 3 threads on 1 usable core",
           "taskset -c 0"},
          // 16: bytes that are not UTF-8 in --out reached JSON: "internal error ... type_error.316" after
          // epoch 1.
          {"fit tiny.yaml --out \"$(printf 'run\\377')\"", 0, ""},
          // 17: format: random with 2^32 samples was "internal error: vector::_M_default_append".
          {"fit tiny.yaml --no-out --set data.train.format=random --set data.train.samples=4294967296", 3,
           "data.train.samples: 4294967296 generated samples of 2 values need"},
          // 21: the limit, not a cycle; the upper bound, not the lower one.
          {"fit blocks17.yaml --no-out", 3, "blocks are nested more than 16 deep (b0 → b1 → "},
          {"fit concat65.yaml --no-out", 3, "takes at most 64 inputs, got 65"},
          // 23: a NUL byte cut the message short; a 5 MB value was echoed whole.
          {"fit csv.yaml --no-out", 4, "expected a finite float32 number, found '1\\x00x'"},
          {"fit long_type.yaml --no-out", 3, "...' (5000000 bytes) is not allowed"},
          // 24: predict --output onto a directory exited 5 after the whole prediction.
          {"predict tiny.yaml --weights good --input x.csv --output out.npy", 2,
           "--output out.npy exists and is a directory; give the path of a file to write"},
      });
  // The limits themselves still pass.
  check_rows(dir, {{"summary blocks16.yaml", 0, ""}, {"summary concat64.yaml", 0, ""}});
  // 16: the run with a non-UTF-8 --out completed its records, each line JSON.
  const std::string run = dir + "/run\xff";
  REQUIRE(fs::exists(run + "/model.safetensors"));
  std::istringstream events(test::slurp(run + "/events.jsonl"));
  int n = 0;
  for (std::string line; std::getline(events, line); ++n) REQUIRE_NOTHROW(nlohmann::json::parse(line));
  REQUIRE(n >= 4);
  const auto summary = nlohmann::json::parse(test::slurp(run + "/summary.json"));
  REQUIRE_THAT(summary["run_dir"].get<std::string>(), Contains("run\\xff"));
  // 23: the 5 MB value is cut, not echoed.
  auto r = test::run_trainer("fit " + dir + "/long_type.yaml --no-out");
  REQUIRE(r.err.size() < 2000);
}

TEST_CASE("bad-input table: a read-only --out is a usage error (exit 2), as one that cannot be created",
          "[bad_input]") {
  const std::string dir = test::temp_dir("table_readonly");
  test::write_file(dir, "tiny.yaml", kTiny);
  fs::create_directories(dir + "/ro");
  // Root ignores permissions: a read-only tmpfs in a private mount namespace, where permitted
  // (not in every container or chroot: there unshare or mount itself fails, and the case is skipped).
  const std::string probe =
      "cd '" + dir + "' && unshare -m sh -c 'mount -t tmpfs -o ro,size=1m none ro' >/dev/null 2>&1";
  if (std::system(probe.c_str()) != 0) {
    WARN("SKIPPED: a read-only mount in a private mount namespace is not permitted here");
    return;
  }
  const std::string cmd = "cd '" + dir +
                          "' && unshare -m sh -c 'mount -t tmpfs -o ro,size=1m none ro || exit 77; " +
                          TRAINER_BINARY + " fit tiny.yaml --out ro' >/dev/null 2>err";
  const int status = std::system(cmd.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 77) {
    WARN("SKIPPED: a read-only mount is not permitted here");
    return;
  }
  const std::string err = test::slurp(dir + "/err");
  INFO(err);
  REQUIRE(code == 2);
  REQUIRE_THAT(err,
               Contains("--out ro: cannot open the lock file ro/run.lock: Read-only file system; choose a "
                        "directory you can write"));
}

TEST_CASE("an error's own line breaks are not shown as \\x0a: a missing GPU lists the GPUs on one line",
          "[bad_input]") {
  BackendRegistry reg;
  BackendEntry gpu;
  gpu.name = "cuda";
  gpu.make = [](const DeviceRequest&, int) -> std::unique_ptr<Backend> { return nullptr; };
  gpu.list_gpus = [](std::string*) {
    std::vector<GpuInfo> gpus(2);
    gpus[0].name = "NVIDIA H200";
    gpus[1].index = 1;
    gpus[1].name = "NVIDIA H100";
    return gpus;
  };
  reg.add(gpu);
  DeviceRequest req;
  req.device = "gpu:7";
  try {
    reg.create(req, nullptr);
    FAIL("gpu:7 was created");
  } catch (const RuntimeError& e) {
    const std::string m = e.what();
    REQUIRE(m == "device gpu:7 does not exist; GPUs present: gpu:0 (NVIDIA H200), gpu:1 (NVIDIA H100)");
  }
}
