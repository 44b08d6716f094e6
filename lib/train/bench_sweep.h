// `trainer bench --sweep mlp-depth`: the blog's MLP depth sweep. For each depth, the config's mlp
// (configs/mlp_disc.yaml: the disc data, widths doubling per layer, SGD, batch 100) is trained on
// the CPU and on each GPU with the same executor as fit: one untimed warm-up epoch (plans, graph
// capture, caches), then the timed steps (the config's epochs' worth, 100 x 10 = 1000, or
// --steps), reading the metrics at each epoch's end as fit does. No run directory is written.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "lib/backend/backend_registry.h"

namespace trainer {

struct SweepOptions {
  std::string config;                // a config whose first layer is an mlp
  std::vector<std::string> sets;     // --set overrides, applied before the depth
  int64_t from = 2, to = 12;         // depths, inclusive
  int64_t steps = 0;                 // timed steps per run; 0: the config's epochs x steps per epoch
  DeviceRequest device;              // threads, math, memory cap; the device is set per column
  std::vector<std::string> devices;  // "cpu", "gpu:0", ...
};

struct SweepCell {
  double seconds = 0;        // the timed steps
  double epoch_seconds = 0;  // seconds per epoch's worth of steps
  double final_loss = 0;     // the mean training loss of the last timed epoch
};

struct SweepRow {
  int64_t depth = 0, params = 0;
  std::map<std::string, SweepCell> cells;  // by device
};

struct SweepResult {
  std::string config;
  int64_t steps = 0, steps_per_epoch = 0, batch = 0;
  std::map<std::string, std::string> descriptions;  // device -> Backend::description()
  std::vector<SweepRow> rows;
  // Per GPU: the first row from which that GPU is faster than the CPU at every deeper depth too;
  // -1 when it never is.
  std::map<std::string, int> gpu_wins_from;
};

// Throws ConfigError when the config's first layer is not an mlp. `progress` is called after each
// run (depth, device, seconds) so a long sweep shows it is alive.
SweepResult run_mlp_depth_sweep(const SweepOptions& o,
                                const std::function<void(int64_t, const std::string&, double)>& progress);

// The index of the first row from which `gpu` beats the CPU at every row after it, or -1.
int gpu_wins_from(const std::vector<SweepRow>& rows, const std::string& gpu);

}  // namespace trainer
