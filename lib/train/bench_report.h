// What `trainer bench` prints and writes (--out) for the matmul and the sweeps: a text table, one
// JSON object (--log-format json), and the same as CSV or JSON for scripts/plot.py.
//
//   matmul CSV  bench,device,description,m,k,n,seconds,gflops,max_rel_error
//   sweep CSV   bench,depth,params,device,description,steps,seconds,epoch_seconds,final_loss
// Both start with a column "bench" ("matmul" or "mlp-depth"), which is how plot.py tells them apart.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "lib/train/bench_matmul.h"
#include "lib/train/bench_sweep.h"
#include "lib/train/progress.h"

namespace trainer {

struct MatmulReport {
  MatmulShape shape;
  int repeats = 0;
  std::vector<MatmulTiming> timings;  // the CPU first
  std::string gpu_note;               // why GPUs are missing, "" when all are in
};

Json matmul_json(const MatmulReport& r);
std::string matmul_text(const MatmulReport& r);
std::string matmul_csv(const MatmulReport& r);

Json sweep_json(const SweepResult& r, const std::string& gpu_note);
std::string sweep_text(const SweepResult& r, const std::string& gpu_note);
std::string sweep_csv(const SweepResult& r);

// --out: a .csv or .json path whose directory exists (UsageError otherwise); checked before the
// benchmark runs.
void check_bench_out(const std::string& path);
// Writes csv or json (by the path's extension) atomically.
void write_bench_out(const std::string& path, const std::string& csv, const Json& json);

}  // namespace trainer
