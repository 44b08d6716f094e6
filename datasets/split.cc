// split_validation: a permutation (or the file order), per-class quotas, and two copies.
#include "datasets/split.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "datasets/sample_stream.h"
#include "lib/core/error.h"
#include "lib/core/rng.h"

namespace trainer {
namespace {

constexpr uint64_t kSplitSalt = 0x73706C6974ull;  // "split": the split's draws differ from the shuffles'

std::string format_fraction(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", f);
  return buf;
}

// The classes the split can stratify by: the labels, or 0/1 float targets of width 1. Empty when
// the targets are not classes (regression, multi-label).
std::vector<int32_t> strata_of(const Dataset& d, int* num_strata) {
  if (d.label_positions > 1) return {};  // windows of a token stream: no class a sample
  if (d.target_width == 0) {
    *num_strata = d.num_classes;
    for (int32_t y : d.labels) *num_strata = std::max(*num_strata, y + 1);
    return d.labels;
  }
  if (d.target_width != 1) return {};
  std::vector<int32_t> out;
  out.reserve(d.targets.size());
  for (float v : d.targets) {
    if (v != 0.f && v != 1.f) return {};
    out.push_back(v == 1.f ? 1 : 0);
  }
  *num_strata = 2;
  return out;
}

// Samples `rows` (ascending) of `d`, same shape, dtype, targets and classes.
Dataset take_rows(const Dataset& d, const std::vector<int64_t>& rows, const std::string& suffix) {
  Dataset out;
  out.name = d.name + suffix;
  out.sample_shape = d.sample_shape;
  out.dtype = d.dtype;
  out.num_classes = d.num_classes;
  out.target_width = d.target_width;
  out.label_positions = d.label_positions;
  out.class_names = d.class_names;
  const int64_t k = d.sample_numel(), w = d.target_width, P = d.label_positions;
  if (d.stream) {
    out.stream = d.stream->subset(rows);  // the rows' images, still read as batches are drawn
  } else if (d.dtype == SampleDtype::u8) {
    out.u8.reserve(size_t(int64_t(rows.size()) * k));
    for (int64_t r : rows) out.u8.insert(out.u8.end(), d.u8.begin() + r * k, d.u8.begin() + (r + 1) * k);
  } else {
    out.f32.reserve(size_t(int64_t(rows.size()) * k));
    for (int64_t r : rows) out.f32.insert(out.f32.end(), d.f32.begin() + r * k, d.f32.begin() + (r + 1) * k);
  }
  for (int64_t r : rows) {
    if (w > 0)
      out.targets.insert(out.targets.end(), d.targets.begin() + r * w, d.targets.begin() + (r + 1) * w);
    else
      out.labels.insert(out.labels.end(), d.labels.begin() + r * P, d.labels.begin() + (r + 1) * P);
  }
  return out;
}

// Validation samples per stratum: floors of n_c * V / n, then the rest by largest remainder
// (split.h). counts: n_c; the result sums to V.
std::vector<int64_t> stratum_quotas(const std::vector<int64_t>& counts, int64_t n, int64_t V) {
  const size_t S = counts.size();
  std::vector<int64_t> quota(S);
  std::vector<unsigned __int128> remainder(S);
  int64_t given = 0;
  for (size_t c = 0; c < S; ++c) {
    const unsigned __int128 p = static_cast<unsigned __int128>(counts[c]) * static_cast<uint64_t>(V);
    quota[c] = int64_t(p / static_cast<uint64_t>(n));
    remainder[c] = p % static_cast<uint64_t>(n);
    given += quota[c];
  }
  std::vector<size_t> order(S);
  std::iota(order.begin(), order.end(), size_t(0));
  // A class that would lose its last training sample comes last; then the largest remainder.
  const auto empties_training = [&](size_t c) { return quota[c] + 1 >= counts[c]; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (empties_training(a) != empties_training(b)) return !empties_training(a);
    return remainder[a] > remainder[b];
  });
  for (size_t i = 0; given < V && i < S; ++i) {
    const size_t c = order[i];
    if (quota[c] < counts[c]) ++quota[c], ++given;
  }
  return quota;
}

}  // namespace

std::vector<bool> validation_mask(const Dataset& data, const SplitOptions& o, std::string* note) {
  if (!(o.fraction > 0.0 && o.fraction < 1.0))
    throw DataError("validation split must be a fraction strictly between 0 and 1, got " +
                    format_fraction(o.fraction));
  if (o.stratify && !o.shuffle) throw InternalError("split_validation: stratify needs shuffle");
  const int64_t n = data.size();
  const int64_t split_at = static_cast<int64_t>(static_cast<double>(n) * (1.0 - o.fraction));
  if (split_at <= 0 || split_at >= n)
    throw DataError("validation split " + format_fraction(o.fraction) + " of the " + std::to_string(n) +
                    " samples in '" + data.name + "' leaves " +
                    (split_at <= 0 ? "no training samples" : "no validation samples"));
  const int64_t V = n - split_at;
  std::vector<bool> to_val(static_cast<size_t>(n), false);
  // Windows of one token stream overlap their neighbours (or touch them): drawn at random, every
  // validation window would have its text's neighbours in training. The end of the stream instead.
  if (o.shuffle && data.label_positions > 1 && note)
    *note = "the windows of a token stream are split in order: validation takes the last " +
            std::to_string(V) + " windows (the end of the text), so that no validation text is trained on";
  if (!o.shuffle || data.label_positions > 1) {
    for (int64_t i = split_at; i < n; ++i) to_val[size_t(i)] = true;
    return to_val;
  }
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t(0));
  SplitMix64 rng(mix64(o.seed ^ kSplitSalt));
  for (int64_t i = n - 1; i > 0; --i) std::swap(perm[size_t(i)], perm[rng.next_below(uint64_t(i) + 1)]);
  int num_strata = 0;
  const std::vector<int32_t> strata = o.stratify ? strata_of(data, &num_strata) : std::vector<int32_t>{};
  if (o.stratify && strata.empty() && note)
    *note = "stratify does not apply to " + std::to_string(data.target_width) +
            " float target(s) per sample that are not all 0 or 1 (regression or multi-label): "
            "the validation samples are drawn at random without it";
  if (strata.empty()) {
    for (int64_t i = 0; i < V; ++i) to_val[size_t(perm[size_t(i)])] = true;
  } else {
    std::vector<int64_t> counts(size_t(num_strata), 0);
    for (int32_t st : strata) ++counts[size_t(st)];
    std::vector<int64_t> quota = stratum_quotas(counts, n, V);
    for (int64_t r : perm) {
      int64_t& q = quota[size_t(strata[size_t(r)])];
      if (q > 0) --q, to_val[size_t(r)] = true;
    }
  }
  return to_val;
}

SplitResult split_validation(const Dataset& data, const SplitOptions& o) {
  SplitResult out;
  const std::vector<bool> to_val = validation_mask(data, o, &out.note);
  std::vector<int64_t> train_rows, val_rows;
  for (int64_t i = 0; i < int64_t(to_val.size()); ++i)
    (to_val[size_t(i)] ? val_rows : train_rows).push_back(i);
  out.train = take_rows(data, train_rows, " (training part)");
  out.validation = take_rows(data, val_rows, " (validation part)");
  return out;
}

namespace {

// "3 (Dress), 7" for the classes present in `has` and absent from `lacks`.
std::string missing_classes(const std::vector<int64_t>& has, const std::vector<int64_t>& lacks,
                            const std::vector<std::string>& names, int64_t* count) {
  constexpr int64_t kNamed = 100;  // a listing longer than this says how many more
  std::string list;
  *count = 0;
  for (size_t c = 0; c < has.size(); ++c) {
    if (has[c] == 0 || (c < lacks.size() && lacks[c] > 0)) continue;
    if (++*count > kNamed) continue;
    list += (list.empty() ? "" : ", ") + std::to_string(c);
    if (c < names.size()) list += " (" + names[c] + ")";
  }
  if (*count > kNamed) list += " and " + std::to_string(*count - kNamed) + " more";
  return list;
}

std::string plural(int64_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "es");
}

}  // namespace

std::string class_coverage_warning(const Dataset& train, const Dataset& validation,
                                   const std::vector<std::string>& class_names) {
  int strata_t = 0, strata_v = 0;
  const std::vector<int32_t> st = strata_of(train, &strata_t), sv = strata_of(validation, &strata_v);
  if (st.empty() || sv.empty()) return "";
  const int S = std::max(strata_t, strata_v);
  std::vector<int64_t> in_train(size_t(S), 0), in_val(size_t(S), 0);
  for (int32_t s : st) ++in_train[size_t(s)];
  for (int32_t s : sv) ++in_val[size_t(s)];
  int64_t only_train = 0, only_val = 0;
  const std::string a = missing_classes(in_train, in_val, class_names, &only_train);
  const std::string b = missing_classes(in_val, in_train, class_names, &only_val);
  std::string w;
  if (only_train > 0)
    w += plural(only_train, "class") + " in the training data " + (only_train == 1 ? "has" : "have") +
         " no validation samples: " + a + " (the validation metrics say nothing about " +
         (only_train == 1 ? "it" : "them") + ")";
  if (only_val > 0)
    w += std::string(w.empty() ? "" : "; ") + plural(only_val, "class") + " in the validation data " +
         (only_val == 1 ? "has" : "have") + " no training samples: " + b + " (the model never learns " +
         (only_val == 1 ? "it" : "them") + ", so validation misclassifies every one)";
  return w;
}

}  // namespace trainer
