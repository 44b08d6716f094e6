#include "lib/metrics/metrics.h"

#include <algorithm>
#include <cmath>
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

// What a loss over every position sums: the correct predictions and the labels counted (in
// s.confusion's place), and the loss, the mean of the batches' token means.
struct TokenTotals {
  double counted = 0, accuracy = 0, loss = 0, perplexity = 0;
};
TokenTotals token_totals(const MetricSums& s) {
  TokenTotals t;
  t.counted = s.confusion.size() == 2 ? s.confusion[1] : 0;
  t.accuracy = t.counted > 0 ? s.confusion[0] / t.counted : 0;
  t.loss = s.loss_sum / std::max<double>(double(s.samples), 1.0);
  t.perplexity = std::exp(std::min(t.loss, 700.0));
  return t;
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

double histogram_auc(const float* pos, const float* neg) {
  double P = 0, N = 0;
  for (int b = 0; b < kAucBins; ++b) P += pos[b], N += neg[b];
  if (P <= 0 || N <= 0) return std::nan("");
  double above = 0, area = 0;  // positives in higher bins than b
  for (int b = kAucBins - 1; b >= 0; --b) {
    area += double(neg[b]) * (above + 0.5 * double(pos[b]));
    above += pos[b];
  }
  return area / (P * N);
}

RegressionRow regression_row(const MetricSums& s, int64_t k) {
  const double* c = s.confusion.data() + k * kRegressionSums;
  const double n = std::max<double>(double(s.samples), 1.0);
  RegressionRow r;
  r.mae = c[0] / n;
  r.rmse = std::sqrt(c[1] / n);
  const double sst = c[3] - c[2] * c[2] / n;
  r.r2 = sst > 0 ? 1.0 - c[1] / sst : 0.0;
  return r;
}

namespace {

struct BinaryTotals {
  double tp = 0, fp = 0, fn = 0, tn = 0;
};
BinaryTotals binary_counts(const MetricSums& s, int64_t k) {
  const double* c = s.confusion.data() + k * kBinarySums;
  return {c[0], c[1], c[2], c[3]};
}
double ratio(double a, double b) { return b > 0 ? a / b : 0; }
double f1_of(double p, double r) { return p + r > 0 ? 2 * p * r / (p + r) : 0; }
double label_auc(const MetricSums& s, int64_t k) {
  std::vector<float> h(size_t(2 * kAucBins));
  const double* c = s.confusion.data() + k * kBinarySums + 4;
  for (size_t i = 0; i < h.size(); ++i) h[i] = float(c[i]);
  return histogram_auc(h.data(), h.data() + kAucBins);
}

double value_metric(const MetricSums& s, const std::string& m, int64_t K, Task task) {
  const double n = std::max<double>(double(s.samples), 1.0);
  if (task == Task::regression) {
    double abs = 0, sq = 0, r2 = 0;
    for (int64_t k = 0; k < K; ++k) {
      abs += s.confusion[size_t(k * kRegressionSums)];
      sq += s.confusion[size_t(k * kRegressionSums + 1)];
      r2 += regression_row(s, k).r2;
    }
    if (m == "mae") return abs / (n * double(K));
    if (m == "mse") return sq / (n * double(K));
    if (m == "rmse") return std::sqrt(sq / (n * double(K)));
    return r2 / double(K);  // r2: the mean over the outputs (scikit-learn's uniform_average)
  }
  BinaryTotals t;
  double macro_f1 = 0, auc = 0;
  for (int64_t k = 0; k < K; ++k) {
    const BinaryTotals b = binary_counts(s, k);
    t.tp += b.tp, t.fp += b.fp, t.fn += b.fn, t.tn += b.tn;
    macro_f1 += f1_of(ratio(b.tp, b.tp + b.fp), ratio(b.tp, b.tp + b.fn));
    auc += label_auc(s, k);
  }
  const double p = ratio(t.tp, t.tp + t.fp), r = ratio(t.tp, t.tp + t.fn);
  if (m == "accuracy") return ratio(t.tp + t.tn, t.tp + t.fp + t.fn + t.tn);
  if (m == "precision") return p;
  if (m == "recall") return r;
  if (m == "f1") return f1_of(p, r);
  if (m == "macro_f1") return macro_f1 / double(K);
  return auc / double(K);  // auc: the mean over the labels (macro)
}

std::string value_report(const MetricSums& s, int64_t K, const std::vector<std::string>& names, Task task) {
  const auto cut = [](const std::string& n) { return n.size() <= 24 ? n : n.substr(0, 23) + "~"; };
  // A binary model's one output is the second class's (names [negative, positive]).
  const size_t shift = task == Task::binary && names.size() == 2 ? 1 : 0;
  const auto name_of = [&](int64_t k) {
    return size_t(k) + shift < names.size() ? cut(names[size_t(k) + shift])
                                            : std::string("output ") + std::to_string(k);
  };
  int width = 8;
  for (int64_t k = 0; k < K; ++k) width = std::max(width, int(name_of(k).size()));
  std::string out;
  char line[320];
  if (task == Task::regression) {
    std::snprintf(line, sizeof line, "%*s %12s %12s %10s\n", width, "output", "mae", "rmse", "r2");
    out += line;
    for (int64_t k = 0; k < K; ++k) {
      const RegressionRow r = regression_row(s, k);
      std::snprintf(line, sizeof line, "%*s %12.6g %12.6g %10.4f\n", width, name_of(k).c_str(), r.mae, r.rmse,
                    r.r2);
      out += line;
    }
    return out;
  }
  std::snprintf(line, sizeof line, "%*s %10s %10s %10s %10s %10s\n", width, "label", "precision", "recall",
                "f1", "support", "auc");
  out += line;
  for (int64_t k = 0; k < K; ++k) {
    const BinaryTotals b = binary_counts(s, k);
    const double p = ratio(b.tp, b.tp + b.fp), r = ratio(b.tp, b.tp + b.fn);
    std::snprintf(line, sizeof line, "%*s %10.4f %10.4f %10.4f %10lld %10.4f\n", width, name_of(k).c_str(), p,
                  r, f1_of(p, r), (long long)(b.tp + b.fn), label_auc(s, k));
    out += line;
  }
  if (K > 1) {
    for (const char* avg : {"micro", "macro"}) {
      const bool micro = avg[1] == 'i';
      const double p = micro ? value_metric(s, "precision", K, task) : 0,
                   r = micro ? value_metric(s, "recall", K, task) : 0;
      if (micro)
        std::snprintf(line, sizeof line, "%*s %10.4f %10.4f %10.4f %10s %10s\n", width, avg, p, r,
                      f1_of(p, r), "", "");
      else
        std::snprintf(line, sizeof line, "%*s %10s %10s %10.4f %10s %10.4f\n", width, avg, "", "",
                      value_metric(s, "macro_f1", K, task), "", value_metric(s, "auc", K, task));
      out += line;
    }
  }
  std::snprintf(line, sizeof line, "decisions: a logit above 0 (probability above 0.5) is positive\n");
  out += line;
  return out;
}

}  // namespace

std::vector<std::pair<std::string, double>> compute_metrics(const MetricSums& s,
                                                            const std::vector<MetricSpec>& specs, int64_t C,
                                                            Task task) {
  std::vector<std::pair<std::string, double>> out;
  const double n = std::max<double>(double(s.samples), 1.0);
  out.emplace_back("loss", s.loss_sum / n);
  if (task == Task::tokens) {
    const TokenTotals t = token_totals(s);
    for (const auto& m : specs)
      out.emplace_back(m.label(), m.type == "accuracy"     ? t.accuracy
                                  : m.type == "perplexity" ? t.perplexity
                                                           : 0.0);
    return out;
  }
  if (task != Task::classification) {
    for (const auto& m : specs) out.emplace_back(m.label(), value_metric(s, m.type, C, task));
    return out;
  }
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

std::string format_class_report(const MetricSums& s, int64_t C, const std::vector<std::string>& names,
                                Task task) {
  if (task == Task::tokens) {
    const TokenTotals t = token_totals(s);
    char line[320];
    std::snprintf(line, sizeof line,
                  "tokens: %.0f predicted over %lld sequences of a vocabulary of %lld\n"
                  "accuracy (next token) %.4f  loss %.4f  perplexity %.4g\n",
                  t.counted, (long long)s.samples, (long long)C, t.accuracy, t.loss, t.perplexity);
    return line;
  }
  if (task != Task::classification) return value_report(s, C, names, task);
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
