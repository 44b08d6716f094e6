// bench: training-step throughput of a config's model on synthetic batches of its input shape
// (token ids below the vocabulary for embedding models), with the same executor, plans and
// memory as fit. No data files are read, so any config can be timed on any machine.
#pragma once

#include <iosfwd>

#include "lib/backend/backend_registry.h"
#include "lib/config/config.h"

namespace trainer {

struct BenchOptions {
  DeviceRequest device;
  int64_t steps = 200;  // timed steps
  int64_t warmup = 20;  // untimed steps after the first (plans, graph capture, caches)
  bool json = false;    // one JSON object instead of a text line
  // Also where the memory goes: every allocation of the plan by what it is for, the activation
  // arena by what it holds, and what the device's peak holds beyond the plan (--memory).
  bool memory = false;
  // The first step's time counts from the process's start (the command line's own bench: what a
  // user waits for, the loader and the libraries' initializers before main included) instead of
  // from run_bench's call (callers inside a longer-lived process).
  bool from_process_start = false;
};

struct BenchResult {
  double first_step_seconds = 0;  // to the end of the first step (BenchOptions::from_process_start)
  double ms_per_step = 0, steps_per_second = 0, samples_per_second = 0;
  size_t peak_bytes = 0;
  double flops_per_step = 0;  // 3 x the forward's convolution and matrix-product FLOPs
  double peak_flops = 0;      // the device's, in its math mode; 0 when unknown
};

BenchResult run_bench(const Config& cfg, const BenchOptions& opt, std::ostream& out);

}  // namespace trainer
