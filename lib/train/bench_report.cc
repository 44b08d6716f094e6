#include "lib/train/bench_report.h"

#include <cstdio>
#include <filesystem>

#include "datasets/csv_records.h"
#include "lib/checkpoint/atomic_file.h"
#include "lib/core/error.h"
#include "lib/core/json_text.h"
#include "lib/core/shape.h"

namespace trainer {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// "GPU 0" for "gpu:0".
std::string gpu_title(const std::string& device) { return "GPU " + device.substr(device.find(':') + 1); }

}  // namespace

Json matmul_json(const MatmulReport& r) {
  Json j{{"event", "bench"}, {"bench", "matmul"},        {"m", r.shape.m},      {"k", r.shape.k},
         {"n", r.shape.n},   {"flops", r.shape.flops()}, {"repeats", r.repeats}};
  Json results = Json::array();
  for (const MatmulTiming& t : r.timings)
    results.push_back({{"device", t.device},
                       {"description", t.description},
                       {"seconds", t.seconds},
                       {"gflops", t.gflops},
                       {"max_rel_error", t.max_rel_error}});
  j["results"] = results;
  Json ratios = Json::object();
  for (const MatmulTiming& t : r.timings)
    if (t.device != "cpu") ratios[t.device] = r.timings.front().seconds / t.seconds;
  j["cpu_over_gpu"] = ratios;
  j["gpu_unavailable"] = r.gpu_note.empty() ? Json() : Json(r.gpu_note);
  return j;
}

std::string matmul_text(const MatmulReport& r) {
  std::string s = "matmul " + r.shape.str() + " fp32, " + fmt("%.3g", r.shape.flops() / 1e9) +
                  " GFLOP; median of " + std::to_string(r.repeats) + " after one untimed run\n";
  char line[512];
  std::snprintf(line, sizeof line, "%-7s %12s %10s %10s  %s\n", "device", "seconds", "GFLOP/s", "max error",
                "backend");
  s += line;
  for (const MatmulTiming& t : r.timings) {
    std::snprintf(line, sizeof line, "%-7s %12.4f %10.1f %10.1e  %s\n", t.device.c_str(), t.seconds, t.gflops,
                  t.max_rel_error, t.description.c_str());
    s += line;
  }
  for (const MatmulTiming& t : r.timings)
    if (t.device != "cpu")
      s += gpu_title(t.device) + ": " + fmt("%.1f", r.timings.front().seconds / t.seconds) +
           "x faster than the CPU (CPU " + fmt("%.4f", r.timings.front().seconds) + " s / GPU " +
           fmt("%.4f", t.seconds) + " s)\n";
  if (r.timings.size() == 1)
    s += "GPU: not available (" + r.gpu_note + "); no ratio\n";
  else if (!r.gpu_note.empty())
    s += "left out: " + r.gpu_note + "\n";
  return s;
}

std::string matmul_csv(const MatmulReport& r) {
  std::string s = "bench,device,description,m,k,n,seconds,gflops,max_rel_error\n";
  for (const MatmulTiming& t : r.timings)
    s += "matmul," + t.device + "," + csv_field(t.description) + "," + std::to_string(r.shape.m) + "," +
         std::to_string(r.shape.k) + "," + std::to_string(r.shape.n) + "," + fmt("%.9g", t.seconds) + "," +
         fmt("%.9g", t.gflops) + "," + fmt("%.3g", t.max_rel_error) + "\n";
  return s;
}

Json sweep_json(const SweepResult& r, const std::string& gpu_note) {
  Json j{{"event", "bench"},
         {"bench", "mlp-depth"},
         {"config", r.config},
         {"steps", r.steps},
         {"steps_per_epoch", r.steps_per_epoch},
         {"batch", r.batch}};
  Json devices = Json::array();
  for (const auto& kv : r.descriptions) devices.push_back({{"device", kv.first}, {"description", kv.second}});
  j["devices"] = devices;
  Json rows = Json::array();
  for (const SweepRow& row : r.rows) {
    Json cells = Json::object();
    for (const auto& kv : row.cells)
      cells[kv.first] = {{"seconds", kv.second.seconds},
                         {"epoch_seconds", kv.second.epoch_seconds},
                         {"final_loss", number_or_null(kv.second.final_loss)}};
    rows.push_back({{"depth", row.depth}, {"params", row.params}, {"results", cells}});
  }
  j["rows"] = rows;
  Json wins = Json::object();
  for (const auto& kv : r.gpu_wins_from)
    wins[kv.first] = kv.second < 0 ? Json()
                                   : Json{{"depth", r.rows[size_t(kv.second)].depth},
                                          {"params", r.rows[size_t(kv.second)].params}};
  j["gpu_wins_from"] = wins;
  j["gpu_unavailable"] = gpu_note.empty() ? Json() : Json(gpu_note);
  return j;
}

std::string sweep_text(const SweepResult& r, const std::string& gpu_note) {
  std::string s = "MLP depth sweep of " + r.config + ": " + std::to_string(r.steps) +
                  " timed training steps (" +
                  fmt("%.4g", double(r.steps) / double(std::max<int64_t>(r.steps_per_epoch, 1))) +
                  " epochs of " + std::to_string(r.steps_per_epoch) + ", batch " + std::to_string(r.batch) +
                  ") per run after one warm-up epoch; seconds\n";
  std::vector<std::string> devices;
  for (const auto& kv : r.descriptions) devices.push_back(kv.first);
  std::sort(devices.begin(), devices.end(), [](const std::string& a, const std::string& b) {
    return (a == "cpu") != (b == "cpu") ? a == "cpu" : a < b;
  });
  char cell[64];
  std::snprintf(cell, sizeof cell, "%5s %12s", "depth", "params");
  s += cell;
  for (const std::string& d : devices) {
    std::snprintf(cell, sizeof cell, " %10s",
                  (d == "cpu" ? std::string("CPU s") : gpu_title(d) + " s").c_str());
    s += cell;
  }
  for (const std::string& d : devices)
    if (d != "cpu") {
      std::snprintf(cell, sizeof cell, " %12s", ("CPU/" + gpu_title(d)).c_str());
      s += cell;
    }
  if (devices.size() == 1) s += "      GPU s";
  s += "\n";
  for (const SweepRow& row : r.rows) {
    std::snprintf(cell, sizeof cell, "%5lld %12s", (long long)row.depth, with_thousands(row.params).c_str());
    s += cell;
    for (const std::string& d : devices) {
      std::snprintf(cell, sizeof cell, " %10.3f", row.cells.at(d).seconds);
      s += cell;
    }
    for (const std::string& d : devices)
      if (d != "cpu") {
        std::snprintf(cell, sizeof cell, " %11.2fx", row.cells.at("cpu").seconds / row.cells.at(d).seconds);
        s += cell;
      }
    if (devices.size() == 1) s += "        n/a";
    s += "\n";
  }
  for (const auto& kv : r.gpu_wins_from) {
    if (kv.second < 0) {
      s += gpu_title(kv.first) + " is not faster than the CPU from any depth on in " +
           std::to_string(r.rows.front().depth) + ".." + std::to_string(r.rows.back().depth) + "\n";
    } else {
      const SweepRow& row = r.rows[size_t(kv.second)];
      s += gpu_title(kv.first) + " is faster than the CPU from depth " + std::to_string(row.depth) + " (" +
           with_thousands(row.params) + " parameters) on\n";
    }
  }
  if (devices.size() == 1)
    s += "GPU: not available (" + gpu_note + "); the CPU column only\n";
  else if (!gpu_note.empty())
    s += "left out: " + gpu_note + "\n";
  return s;
}

std::string sweep_csv(const SweepResult& r) {
  std::string s = "bench,depth,params,device,description,steps,seconds,epoch_seconds,final_loss\n";
  for (const SweepRow& row : r.rows)
    for (const auto& kv : row.cells)
      s += "mlp-depth," + std::to_string(row.depth) + "," + std::to_string(row.params) + "," + kv.first +
           "," + csv_field(r.descriptions.at(kv.first)) + "," + std::to_string(r.steps) + "," +
           fmt("%.9g", kv.second.seconds) + "," + fmt("%.9g", kv.second.epoch_seconds) + "," +
           fmt("%.9g", kv.second.final_loss) + "\n";
  return s;
}

void check_bench_out(const std::string& path) {
  if (!ends_with(path, ".csv") && !ends_with(path, ".json"))
    throw UsageError("--out " + path + ": expected a .csv or .json file");
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
    throw UsageError("--out " + path + ": " + dir.string() +
                     (std::filesystem::exists(dir, ec) ? " is not a directory" : " does not exist"));
  if (std::filesystem::is_directory(path, ec)) throw UsageError("--out " + path + ": is a directory");
}

void write_bench_out(const std::string& path, const std::string& csv, const Json& json) {
  write_file_atomic(path, ends_with(path, ".csv") ? csv : json_text(json, 2) + "\n");
}

}  // namespace trainer
