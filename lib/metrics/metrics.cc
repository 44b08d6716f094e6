#include "lib/metrics/metrics.h"

#include <algorithm>
#include <cstdio>

#include "lib/config/class_names.h"

namespace trainer {
namespace {

struct ClassStats {
  std::vector<double> precision, recall, f1, support;
};

ClassStats class_stats(const MetricSums& s, int64_t C) {
  ClassStats st;
  for (int64_t c = 0; c < C; ++c) {
    double tp = s.confusion[size_t(c * C + c)], row = 0, col = 0;
    for (int64_t j = 0; j < C; ++j) {
      row += s.confusion[size_t(c * C + j)];
      col += s.confusion[size_t(j * C + c)];
    }
    double p = col > 0 ? tp / col : 0, r = row > 0 ? tp / row : 0;
    st.precision.push_back(p);
    st.recall.push_back(r);
    st.f1.push_back(p + r > 0 ? 2 * p * r / (p + r) : 0);
    st.support.push_back(row);
  }
  return st;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}

}  // namespace

std::vector<int64_t> topk_needed(const std::vector<MetricSpec>& specs) {
  std::vector<int64_t> ks;
  for (const auto& m : specs)
    if (m.type == "top_k_accuracy" && std::find(ks.begin(), ks.end(), m.k) == ks.end()) ks.push_back(m.k);
  return ks;
}

std::vector<std::pair<std::string, double>> compute_metrics(const MetricSums& s,
                                                            const std::vector<MetricSpec>& specs, int64_t C) {
  std::vector<std::pair<std::string, double>> out;
  const double n = std::max<double>(double(s.samples), 1.0);
  out.emplace_back("loss", s.loss_sum / n);
  const std::vector<int64_t> ks = topk_needed(specs);
  ClassStats st = class_stats(s, C);
  for (const auto& m : specs) {
    double v = 0;
    if (m.type == "accuracy") {
      for (int64_t c = 0; c < C; ++c) v += s.confusion[size_t(c * C + c)];
      v /= n;
    } else if (m.type == "top_k_accuracy") {
      v = s.topk[size_t(std::find(ks.begin(), ks.end(), m.k) - ks.begin())] / n;
    } else if (m.type == "precision") {
      v = mean(st.precision);
    } else if (m.type == "recall") {
      v = mean(st.recall);
    } else if (m.type == "f1") {
      v = mean(st.f1);
    }
    out.emplace_back(m.label(), v);
  }
  return out;
}

std::vector<ClassRow> class_report(const MetricSums& s, int64_t C, const std::vector<std::string>& names) {
  const ClassStats st = class_stats(s, C);
  std::vector<ClassRow> rows;
  for (int64_t c = 0; c < C; ++c)
    rows.push_back({class_label(names, c), st.precision[size_t(c)], st.recall[size_t(c)], st.f1[size_t(c)],
                    int64_t(st.support[size_t(c)])});
  rows.push_back({"macro", mean(st.precision), mean(st.recall), mean(st.f1), s.samples});
  return rows;
}

std::string format_class_report(const MetricSums& s, int64_t C, const std::vector<std::string>& names) {
  const std::vector<ClassRow> rows = class_report(s, C, names);
  // Names are cut to 24 bytes so one long name cannot push the numbers off the screen.
  const auto cut = [](const std::string& n) { return n.size() <= 24 ? n : n.substr(0, 23) + "~"; };
  int width = 8;
  for (const ClassRow& r : rows) width = std::max(width, int(cut(r.name).size()));
  std::string out;
  char line[320];
  std::snprintf(line, sizeof line, "%*s %10s %10s %10s %10s\n", width, "class", "precision", "recall", "f1",
                "support");
  out += line;
  for (const ClassRow& r : rows) {
    std::snprintf(line, sizeof line, "%*s %10.4f %10.4f %10.4f %10lld\n", width, cut(r.name).c_str(),
                  r.precision, r.recall, r.f1, (long long)r.support);
    out += line;
  }
  // Rows: "id name" (or the id); columns: ids, as wide as the largest count needs.
  const int id_width = int(std::to_string(C - 1).size());
  int row_width = id_width, cell = std::max(id_width, 5);
  for (int64_t c = 0; c < C; ++c) {
    if (!names.empty()) row_width = std::max(row_width, id_width + 1 + int(cut(names[size_t(c)]).size()));
    for (int64_t j = 0; j < C; ++j)
      cell = std::max(cell, int(std::to_string((long long)s.confusion[size_t(c * C + j)]).size()));
  }
  out += "confusion matrix (rows: true class, columns: predicted class)\n";
  std::snprintf(line, sizeof line, "%*s", row_width, "");
  out += line;
  for (int64_t c = 0; c < C; ++c) {
    std::snprintf(line, sizeof line, " %*lld", cell, (long long)c);
    out += line;
  }
  out += "\n";
  for (int64_t r = 0; r < C; ++r) {
    std::string head = std::to_string(r);
    head = std::string(size_t(id_width) - head.size(), ' ') + head;
    if (!names.empty()) head += " " + cut(names[size_t(r)]);
    std::snprintf(line, sizeof line, "%-*s", row_width, head.c_str());
    out += line;
    for (int64_t c = 0; c < C; ++c) {
      std::snprintf(line, sizeof line, " %*lld", cell, (long long)s.confusion[size_t(r * C + c)]);
      out += line;
    }
    out += "\n";
  }
  return out;
}

}  // namespace trainer
