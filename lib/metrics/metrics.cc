#include "lib/metrics/metrics.h"

#include <algorithm>
#include <cstdio>

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

std::string format_class_report(const MetricSums& s, int64_t C) {
  ClassStats st = class_stats(s, C);
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%8s %10s %10s %10s %10s\n", "class", "precision", "recall", "f1",
                "support");
  out += line;
  for (int64_t c = 0; c < C; ++c) {
    std::snprintf(line, sizeof line, "%8lld %10.4f %10.4f %10.4f %10.0f\n", (long long)c,
                  st.precision[size_t(c)], st.recall[size_t(c)], st.f1[size_t(c)], st.support[size_t(c)]);
    out += line;
  }
  std::snprintf(line, sizeof line, "%8s %10.4f %10.4f %10.4f %10lld\n", "macro", mean(st.precision),
                mean(st.recall), mean(st.f1), (long long)s.samples);
  out += line;
  out += "confusion matrix (rows: true class, columns: predicted class)\n";
  for (int64_t r = 0; r < C; ++r) {
    for (int64_t c = 0; c < C; ++c) {
      std::snprintf(line, sizeof line, "%7.0f", s.confusion[size_t(r * C + c)]);
      out += line;
    }
    out += "\n";
  }
  return out;
}

}  // namespace trainer
