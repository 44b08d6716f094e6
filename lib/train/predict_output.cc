#include "lib/train/predict_output.h"

#include <cstdio>
#include <filesystem>

#include "datasets/csv_records.h"
#include "datasets/npy_reader.h"
#include "lib/checkpoint/atomic_file.h"
#include "lib/config/class_names.h"
#include "lib/core/error.h"

namespace trainer {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The header row of a predictions CSV, its line end included.
std::string header_line(const std::vector<std::string>& header) {
  std::string text;
  for (size_t i = 0; i < header.size(); ++i) text += (i ? "," : "") + header[i];
  return text + "\n";
}

// n floats as CSV cells (%.9g: they read back exactly), each after *sep, which becomes ",".
void append_floats(std::string& text, const char** sep, const float* v, int64_t n) {
  char cell[32];
  for (int64_t k = 0; k < n; ++k, *sep = ",") {
    std::snprintf(cell, sizeof cell, "%s%.9g", *sep, double(v[k]));
    text += cell;
  }
}

}  // namespace

PredictWrite parse_predict_write(const std::string& s) {
  if (s == "probabilities") return PredictWrite::probabilities;
  if (s == "class") return PredictWrite::arg_max;
  if (s == "both") return PredictWrite::both;
  throw UsageError("--write " + s + ": allowed: probabilities, class, both");
}

void check_predict_output(const std::string& path, PredictWrite what) {
  const bool csv = ends_with(path, ".csv");
  if (!csv && !ends_with(path, ".npy"))
    throw UsageError("--output " + path + ": expected a .npy or .csv file");
  if (!csv && what == PredictWrite::both)
    throw UsageError("--output " + path +
                     ": --write both needs a .csv file (a .npy file holds one array); use --write "
                     "probabilities or --write class for .npy");
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
    throw UsageError("--output " + path + ": " + dir.string() +
                     (std::filesystem::exists(dir, ec) ? " is not a directory" : " does not exist"));
  // The file itself: a directory (or FIFO, device) there would fail the final rename after the
  // whole prediction, as a write error; it is the user's to change, before anything runs.
  const auto status = std::filesystem::status(path, ec);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw UsageError("--output " + path + " exists and is " +
                     (std::filesystem::is_directory(status) ? std::string("a directory")
                                                            : std::string("not a regular file")) +
                     "; give the path of a file to write");
}

std::vector<int64_t> arg_max_classes(const std::vector<float>& probs, int64_t N, int64_t C) {
  std::vector<int64_t> ids(size_t(N), 0);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t c = 1; c < C; ++c)
      if (probs[size_t(i * C + c)] > probs[size_t(i * C + ids[size_t(i)])]) ids[size_t(i)] = c;
  return ids;
}

void write_predictions(const std::string& path, PredictWrite what, const std::vector<float>& probs, int64_t N,
                       int64_t C, const std::vector<std::string>& names,
                       const std::vector<std::string>& files) {
  const bool with_probs = what != PredictWrite::arg_max, with_class = what != PredictWrite::probabilities;
  const std::vector<int64_t> ids = arg_max_classes(probs, N, C);
  if (!ends_with(path, ".csv")) {
    if (with_probs)
      write_npy_f32(path, {N, C}, probs.data());
    else
      write_npy_i64(path, {N}, ids.data());
    return;
  }
  std::vector<std::string> header;
  if (!files.empty()) header.push_back("file");
  if (with_probs)
    for (int64_t c = 0; c < C; ++c)
      header.push_back(names.empty() ? "class_" + std::to_string(c) : csv_field(names[size_t(c)]));
  if (with_class) {
    header.push_back("predicted_id");
    if (!names.empty()) header.push_back("predicted_name");
  }
  std::string text = header_line(header);
  for (int64_t i = 0; i < N; ++i) {
    const char* sep = "";
    if (!files.empty()) {
      text += csv_field(files[size_t(i)]);
      sep = ",";
    }
    if (with_probs) append_floats(text, &sep, probs.data() + i * C, C);
    if (with_class) {
      text += sep + std::to_string(ids[size_t(i)]);
      if (!names.empty()) text += "," + csv_field(class_label(names, ids[size_t(i)]));
    }
    text += "\n";
  }
  write_file_atomic(path, text);
}

void write_value_predictions(const std::string& path, PredictWrite what, const std::vector<float>& values,
                             int64_t N, int64_t K, const std::vector<std::string>& names, bool binary,
                             const std::vector<std::string>& files) {
  const bool with_values = !binary || what != PredictWrite::arg_max;
  const bool with_decisions = binary && what != PredictWrite::probabilities;
  std::vector<int64_t> decisions;
  if (with_decisions)
    for (float p : values) decisions.push_back(p > 0.5f ? 1 : 0);
  if (!ends_with(path, ".csv")) {
    if (with_values)
      write_npy_f32(path, {N, K}, values.data());
    else
      write_npy_i64(path, {N, K}, decisions.data());
    return;
  }
  const auto name = [&](const std::string& one, const std::string& prefix, int64_t k) {
    if (k < int64_t(names.size()))
      return csv_field(prefix.empty() ? names[size_t(k)] : prefix + names[size_t(k)]);
    if (K == 1) return one;
    return (prefix.empty() ? std::string(binary ? "label_" : "value_") : prefix + "label_") +
           std::to_string(k);
  };
  std::vector<std::string> header;
  if (!files.empty()) header.push_back("file");
  if (with_values)
    for (int64_t k = 0; k < K; ++k) header.push_back(name(binary ? "probability" : "value", "", k));
  if (with_decisions)
    for (int64_t k = 0; k < K; ++k) header.push_back(name("predicted", "predicted_", k));
  std::string text = header_line(header);
  for (int64_t i = 0; i < N; ++i) {
    const char* sep = "";
    if (!files.empty()) {
      text += csv_field(files[size_t(i)]);
      sep = ",";
    }
    if (with_values) append_floats(text, &sep, values.data() + i * K, K);
    if (with_decisions)
      for (int64_t k = 0; k < K; ++k, sep = ",") text += sep + std::to_string(decisions[size_t(i * K + k)]);
    text += "\n";
  }
  write_file_atomic(path, text);
}

}  // namespace trainer
