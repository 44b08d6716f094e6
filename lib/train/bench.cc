#include "lib/train/bench.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <ostream>

#include "lib/core/elapsed.h"
#include "lib/core/json_text.h"
#include "lib/core/rng.h"
#include "lib/layers/embedding.h"
#include "lib/memory/allocator.h"
#include "lib/train/session.h"

namespace trainer {

using Clock = std::chrono::steady_clock;

BenchResult run_bench(const Config& cfg, const BenchOptions& opt, std::ostream& out) {
  const auto t0 = Clock::now();
  const int64_t B = cfg.data.batch_size;
  std::unique_ptr<Session> s = open_session(cfg, opt.device, {B});
  const Model& model = *s->model;

  // One synthetic batch: standard-normal-ish features, or token ids for an embedding model.
  // x: (B, input...)  y: (B). Making it is not part of the first step's time (Box-Muller for
  // resnet18's 38.5M values at 224 x 224 took over a second).
  const auto data_start = Clock::now();
  SplitMix64 rng = SplitMix64::counter(cfg.seed ^ 0xBE7C4u);
  std::vector<float> x(size_t(B * model.input_shape().numel()));
  const auto* emb = dynamic_cast<const Embedding*>(model.layers().front().get());
  for (auto& v : x) {
    if (emb) {
      v = float(rng.next_u64() % uint64_t(emb->input_dim));
    } else {
      const double u = std::max(rng.uniform(), 1e-12), w = rng.uniform();
      v = float(std::sqrt(-2 * std::log(u)) * std::cos(2 * M_PI * w));
    }
  }
  // A class a sample, or one per position (format text, tokens).
  std::vector<int32_t> y(static_cast<size_t>(B * cfg.loss_config.positions));
  for (auto& v : y) v = int32_t(rng.next_u64() % uint64_t(std::max<int64_t>(s->classes, 1)));
  const auto data_time = Clock::now() - data_start;

  Executor& ex = *s->executor;
  const float lr = float(cfg.optimizer.lr);
  int64_t t = 0;
  const auto step_start = Clock::now();
  ex.train_step(B, x.data(), y.data(), ++t, lr);
  ex.read_metrics();  // waits for the device
  spdlog::debug("first step ran in {:.0f} ms", ms_since(step_start));
  BenchResult r;
  // Without the synthetic batch's making; from the process's start where asked and the system
  // says, else from this function's.
  const double data_seconds = std::chrono::duration<double>(data_time).count();
  const double process_age = opt.from_process_start ? seconds_since_process_start() : -1;
  r.first_step_seconds =
      (process_age >= 0 ? process_age : std::chrono::duration<double>(Clock::now() - t0).count()) -
      data_seconds;
  for (int64_t i = 0; i < opt.warmup; ++i) ex.train_step(B, x.data(), y.data(), ++t, lr);
  ex.read_metrics();
  const auto t1 = Clock::now();
  for (int64_t i = 0; i < opt.steps; ++i) ex.train_step(B, x.data(), y.data(), ++t, lr);
  ex.read_metrics();
  const double seconds = seconds_since(t1);
  r.ms_per_step = 1000.0 * seconds / double(opt.steps);
  r.steps_per_second = double(opt.steps) / seconds;
  r.samples_per_second = r.steps_per_second * double(B);
  r.peak_bytes = s->backend->allocator().peak_bytes();
  double forward = 0;
  for (const auto& l : model.layers()) forward += l->forward_flops();
  r.flops_per_step = 3.0 * forward * double(B);
  r.peak_flops = s->backend->peak_flops();
  const double achieved = r.flops_per_step * r.steps_per_second;
  const double mfu = r.peak_flops > 0 ? achieved / r.peak_flops : 0;
  std::vector<std::pair<std::string, size_t>> memory;
  const size_t planned = ex.planned_bytes();
  if (opt.memory) {
    memory = ex.memory_breakdown();
    memory.emplace_back(
        "outside the plan at the peak (libraries' handles and workspaces, algorithm measurement)",
        r.peak_bytes > planned ? r.peak_bytes - planned : 0);
  }
  if (opt.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& m : memory) rows.push_back({{"what", m.first}, {"bytes", m.second}});
    out << json_text(
               nlohmann::json{{"config", cfg.file},
                              {"device", s->backend->description()},
                              {"batch", B},
                              {"params", model.num_params()},
                              {"steps", opt.steps},
                              {"first_step_s", r.first_step_seconds},
                              {"ms_per_step", r.ms_per_step},
                              {"steps_per_s", r.steps_per_second},
                              {"samples_per_s", r.samples_per_second},
                              {"tokens_per_s", r.samples_per_second * double(cfg.loss_config.positions)},
                              {"peak_bytes", r.peak_bytes},
                              {"flops_per_step", r.flops_per_step},
                              {"tflops", achieved / 1e12},
                              {"peak_tflops", r.peak_flops / 1e12},
                              {"mfu", r.peak_flops > 0 ? nlohmann::json(mfu) : nlohmann::json(nullptr)},
                              {"memory", opt.memory ? rows : nlohmann::json(nullptr)}})
        << std::endl;
  } else {
    char line[320];
    std::snprintf(line, sizeof line,
                  "%s on %s: batch %lld, %lld steps: %.3g ms/step, %.1f steps/s, %.0f samples/s; "
                  "first step after %.2f s; peak memory %s",
                  cfg.file.c_str(), s->backend->description().c_str(), (long long)B, (long long)opt.steps,
                  r.ms_per_step, r.steps_per_second, r.samples_per_second, r.first_step_seconds,
                  format_bytes(r.peak_bytes).c_str());
    out << line;
    if (cfg.loss_config.positions > 1) {  // a language model: its positions are its tokens
      std::snprintf(line, sizeof line, "; %.0f tokens/s",
                    r.samples_per_second * double(cfg.loss_config.positions));
      out << line;
    }
    // Arithmetic: the step's FLOPs, the rate, and the fraction of the device's peak (MFU).
    if (r.flops_per_step > 0) {
      std::snprintf(line, sizeof line, "; %.3g GFLOP/step, %.3g TFLOP/s", r.flops_per_step / 1e9,
                    achieved / 1e12);
      out << line;
      if (r.peak_flops > 0) {
        std::snprintf(line, sizeof line, ", MFU %.1f%% of %.0f TFLOP/s", 100 * mfu, r.peak_flops / 1e12);
        out << line;
      }
    }
    out << std::endl;
    if (opt.memory) {
      out << "memory: peak " << format_bytes(r.peak_bytes) << ", planned " << format_bytes(planned)
          << std::endl;
      size_t width = 0;
      for (const auto& m : memory) width = std::max(width, m.first.size());
      for (const auto& m : memory) {
        const double share = r.peak_bytes ? 100.0 * double(m.second) / double(r.peak_bytes) : 0.0;
        std::snprintf(line, sizeof line, "  %-*s %12s %5.1f%%", int(width), m.first.c_str(),
                      format_bytes(m.second).c_str(), share);
        out << line << std::endl;
      }
    }
  }
  return r;
}

}  // namespace trainer
