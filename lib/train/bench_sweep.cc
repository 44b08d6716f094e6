#include "lib/train/bench_sweep.h"

#include <chrono>

#include "lib/config/config.h"
#include "lib/core/elapsed.h"
#include "lib/core/error.h"
#include "lib/train/session.h"

namespace trainer {
namespace {

using Clock = std::chrono::steady_clock;

// One depth on one device: warm-up epoch, then `steps` timed steps, epoch by epoch.
SweepCell time_run(const Config& cfg, const DeviceRequest& device, int64_t steps, std::string* description,
                   int64_t* params, int64_t* steps_per_epoch) {
  RunData data = load_run_data(cfg, true);
  const int64_t B = cfg.data.batch_size;
  std::vector<int64_t> sizes;
  add_batch_sizes(sizes, data.train.size(), B, cfg.data.drop_last);
  auto s = open_session(cfg, device, sizes);
  *description = s->backend->description();
  *params = s->model->num_params();
  BatchLoader loader(data.train, B, cfg.data.shuffle, cfg.data.drop_last, normalization_for(cfg, data.train),
                     cfg.seed);
  *steps_per_epoch = loader.batches_per_epoch();
  Executor& ex = *s->executor;
  const float lr = float(cfg.optimizer.lr);
  int64_t t = 0, epoch = 0;
  const float* x;
  const void* y;
  int64_t rows;
  // Runs up to `n` steps, epoch by epoch; returns the last epoch's mean loss.
  const auto train = [&](int64_t n) {
    double loss = 0;
    for (int64_t done = 0; done < n;) {
      ex.reset_metrics();
      loader.start_epoch(epoch++);
      while (done < n && loader.next(&x, &y, &rows)) {
        ex.train_step(rows, x, y, ++t, lr);
        ++done;
      }
      const MetricSums m = ex.read_metrics();  // synchronizes, as fit does at each epoch's end
      loss = m.samples ? m.loss_sum / double(m.samples) : 0;
    }
    return loss;
  };
  train(*steps_per_epoch);
  const int64_t timed = steps > 0 ? steps : cfg.epochs * *steps_per_epoch;
  SweepCell c;
  const auto t0 = Clock::now();
  c.final_loss = train(timed);
  c.seconds = seconds_since(t0);
  c.epoch_seconds = c.seconds * double(*steps_per_epoch) / double(timed);
  return c;
}

}  // namespace

int gpu_wins_from(const std::vector<SweepRow>& rows, const std::string& gpu) {
  int from = -1;
  for (int i = int(rows.size()) - 1; i >= 0; --i) {
    const auto& cells = rows[size_t(i)].cells;
    const auto g = cells.find(gpu), c = cells.find("cpu");
    if (g == cells.end() || c == cells.end() || g->second.seconds >= c->second.seconds) break;
    from = i;
  }
  return from;
}

SweepResult run_mlp_depth_sweep(const SweepOptions& o,
                                const std::function<void(int64_t, const std::string&, double)>& progress) {
  if (o.from < 1 || o.to < o.from)
    throw UsageError("--from " + std::to_string(o.from) + " --to " + std::to_string(o.to) +
                     ": expected 1 <= from <= to");
  SweepResult r;
  r.config = o.config;
  {  // checked before depth is set: the config loader would only call it an unknown key
    const Config plain = load_config(o.config, o.sets);
    if (!plain.layers[0]["type"] || plain.layers[0]["type"].as<std::string>() != "mlp")
      throw ConfigError(o.config +
                        ": --sweep mlp-depth varies model.layers.0.depth, so the first layer must be an mlp "
                        "(as in configs/mlp_disc.yaml)");
  }
  for (int64_t depth = o.from; depth <= o.to; ++depth) {
    std::vector<std::string> sets = o.sets;
    sets.push_back("model.layers.0.depth=" + std::to_string(depth));
    const Config cfg = load_config(o.config, sets);
    SweepRow row;
    row.depth = depth;
    for (const std::string& dev : o.devices) {
      DeviceRequest req = o.device;
      req.device = dev;
      row.cells[dev] = time_run(cfg, req, o.steps, &r.descriptions[dev], &row.params, &r.steps_per_epoch);
      if (progress) progress(depth, dev, row.cells[dev].seconds);
    }
    r.batch = cfg.data.batch_size;
    r.steps = o.steps > 0 ? o.steps : cfg.epochs * r.steps_per_epoch;
    r.rows.push_back(row);
  }
  for (const std::string& dev : o.devices)
    if (dev != "cpu") r.gpu_wins_from[dev] = gpu_wins_from(r.rows, dev);
  return r;
}

}  // namespace trainer
