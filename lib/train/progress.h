// Progress: what a run prints while it trains.
//
//   text (default)  one timestamped line per epoch on `out`. When `live` (the stream is a
//                   terminal) a Keras-like line is redrawn in place during the epoch:
//                     epoch 3/10  120/300 [=======>............] 3.2s 26.7ms/step ETA 4.8s loss=0.4123
//                     accuracy=0.8512
//                   and replaced by the epoch line at the end ("\r" and "ESC[K": only then). The
//                   running loss needs a device sync, so the line is refreshed every log_every
//                   steps, or about every 0.5 s when log_every is 0.
//   json            one JSON object per line on `out` ({"event":"epoch",...} per epoch and a final
//                   {"event":"summary",...}); the human text goes to `text` (stderr).
//   quiet           only the final summary line (text) or object (json).
// Without a terminal nothing but printable text and newlines is written.
// When a write to `out` fails (a closed pipe: fit ... | head -1; SIGPIPE is ignored, so the write
// fails with EPIPE) nothing more is written there; a warning says so once on stderr and the run
// goes on, so its run directory is completed as usual.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace trainer {

// Records keep their keys in insertion order ("event" first).
using Json = nlohmann::ordered_json;

enum class LogFormat { text, json };

struct ReportOptions {
  LogFormat format = LogFormat::text;
  bool quiet = false;
  bool live = false;             // draw the live line (the human stream is a terminal)
  int64_t log_every = 0;         // steps between live refreshes; 0: about every 0.5 s
  int columns = 0;               // terminal width for the live line; 0: 120
  std::ostream* text = nullptr;  // the human stream in json mode (default std::cerr)
};

class Reporter {
 public:
  using Metrics = std::vector<std::pair<std::string, double>>;
  Reporter(const ReportOptions& o, std::ostream& out);

  // The stream for human text (out in text mode, ReportOptions::text in json mode).
  std::ostream& text() { return *text_; }

  void epoch_begin(int64_t epoch, int64_t epochs, int64_t steps, int64_t first_step);
  // After each training step (1-based within the epoch): whether to fetch running metrics now.
  bool wants_refresh(int64_t step);
  void refresh(int64_t step, const Metrics& running);
  // The epoch's record: prints the text line and/or the JSON object.
  void epoch_end(const std::string& text_line, const Json& record);
  // Human notes (early stopping, lr reductions, the class report); dropped when quiet.
  void note(const std::string& line);
  void summary(const std::string& text_line, const Json& record);

 private:
  void clear_live();
  void check_streams();  // after each write: notices a stream that failed

  ReportOptions o_;
  std::ostream& out_;
  std::ostream* text_;
  bool live_drawn_ = false;
  bool out_failed_ = false, text_failed_ = false;
  int64_t epoch_ = 0, epochs_ = 0, steps_ = 0, first_step_ = 0;
  std::chrono::steady_clock::time_point t0_, last_;
};

// What one finished epoch prints and records:
//   line     "[2026-11-22 17:13:26] epoch 3/10 loss=0.4123 accuracy=0.8512 val_loss=... lr=0.001
//            time=2.41s (8.0 ms/step)" (lr only when a schedule changes it)
//   json {"event":"epoch","epoch":3,"epochs":10,"step":900,"loss":...,"val_...":...,"lr":...,"seconds":...}
//   columns  the metrics.csv columns after "epoch": train metrics, val_ metrics, lr, seconds
struct EpochRecord {
  std::string line;
  Json json;
  std::vector<std::pair<std::string, double>> columns;
};
EpochRecord epoch_record(int64_t epoch, int64_t epochs, int64_t step,
                         const std::vector<std::pair<std::string, double>>& train,
                         const std::vector<std::pair<std::string, double>>& val, double lr, bool show_lr,
                         double seconds, double ms_per_step);

// The live line of step `step` of `steps`, at most columns - 1 characters (0: 120):
//   "epoch 3/10    120/300 [=======>............] 3.2s 26.7ms/step ETA 4.8s loss=0.4123 accuracy=0.8512"
// On a narrow terminal the bar shrinks first (down to 6), then goes, then the elapsed time and
// ms/step; metrics are dropped (the last first) only when nothing else is left to give.
std::string live_line(int64_t epoch, int64_t epochs, int64_t step, int64_t steps, double elapsed,
                      double per_step, const std::vector<std::pair<std::string, double>>& running,
                      int columns);

// A JSON number, or null for NaN and infinities (which JSON cannot hold).
Json number_or_null(double v);

// "2026-11-22 17:13:26" in local time.
std::string timestamp_now();

// " loss=0.4123 accuracy=0.8512" with an optional prefix for names ("val_").
std::string format_metrics(const std::vector<std::pair<std::string, double>>& m, const std::string& prefix);

}  // namespace trainer
