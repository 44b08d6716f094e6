// read_csv: one streamed pass over the records (CsvRecords), each row's features written as one
// float slot per feature column (a number, NaN for a missing cell to be filled, or a category's
// id), then, after the last row: categories sorted, missing cells filled, numeric columns
// standardized, categorical slots expanded to one-hot. A table without categorical columns is
// never copied: its slots are the samples.
#include "datasets/csv_reader.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string_view>

#include "datasets/csv_cells.h"
#include "datasets/csv_records.h"
#include "datasets/csv_targets.h"
#include "datasets/file_bytes.h"
#include "lib/core/error.h"
#include "lib/core/printable.h"

namespace trainer {
namespace {

struct FeatureColumn {
  size_t column = 0;  // in the features file
  std::string key;    // its header name, or its index: the key of its categories
  enum class Kind { undecided, numeric, categorical } kind = Kind::undecided;
  std::map<std::string, int32_t, std::less<>> ids;  // category -> id (learning: order of appearance)
  std::vector<std::string> order;                   // learning: the categories in order of appearance
  bool inferred = false;  // categorical by its first value (not by categorical_columns)
  size_t first_line = 0;
  std::string first_value;
};

// The first record of a file after skip_rows: the header (when there is one) and the column count.
struct FileHead {
  std::vector<std::string> header;
  size_t ncols = 0;
  bool pending = false;  // the first record is a data row, still to be read
};

FileHead read_head(CsvRecords& records, std::vector<std::string_view>* cells, const CsvOptions& o) {
  FileHead h;
  for (int64_t i = 0; i < o.skip_rows; ++i)
    if (!records.next(cells)) throw DataError("CSV file '" + records.path() + "' has no data rows");
  if (!records.next(cells)) throw DataError("CSV file '" + records.path() + "' has no data rows");
  h.ncols = cells->size();
  bool header = o.has_header;
  if (o.detect_header) {
    header = false;
    double v = 0;
    for (std::string_view c : *cells) header = header || (!parse_number(c, &v) && !is_missing(c));
  }
  if (header)
    h.header.assign(cells->begin(), cells->end());
  else
    h.pending = true;
  return h;
}

[[noreturn]] void ragged(const CsvRecords& r, size_t expected, size_t first_line, size_t found) {
  throw DataError(r.path() + ":" + std::to_string(r.line()) + ": expected " + std::to_string(expected) +
                  " columns (as on line " + std::to_string(first_line) + "), found " + std::to_string(found));
}

std::string cell_text(std::string_view cell) {
  return cell.empty() ? std::string("an empty cell") : quoted(cell);
}

class CsvReader {
 public:
  CsvReader(const std::string& path, const CsvOptions& o)
      : o_(o), path_(path), features_file_(std::make_unique<DataFile>(path), o.delimiter, o.whitespace) {}

  Dataset read(CsvEncoding* learned);

 private:
  void resolve_columns();
  void add_row(const std::vector<std::string_view>& cells);
  void finish(Dataset* d);
  std::string where() const { return path_ + ":" + std::to_string(features_file_.line()) + ": "; }

  const CsvOptions& o_;
  std::string path_;
  CsvRecords features_file_;
  std::unique_ptr<CsvRecords> targets_file_;
  FileHead head_, targets_head_;
  size_t first_line_ = 0, targets_first_line_ = 0;
  std::vector<size_t> label_columns_;  // in the file that holds them
  bool has_labels_ = true;
  std::vector<FeatureColumn> features_;
  std::vector<float> slots_;  // rows x features_.size()
  int64_t rows_ = 0;
  std::unique_ptr<CsvTargets> targets_;
  std::vector<std::string_view> label_cells_, target_cells_;
  CsvEncoding enc_;  // what finish() used
};

void CsvReader::resolve_columns() {
  const bool separate = !o_.targets_path.empty();
  const std::vector<std::string>& header = head_.header;
  const size_t ncols = head_.ncols;
  const CsvEncoding& enc = o_.encoding;
  // Labels in a file of their own are not read where they are optional (predict).
  has_labels_ = !o_.label_columns.empty() && !(separate && o_.labels_optional);
  // Without its label columns (predict): the columns the training file had, minus the labels.
  std::vector<int64_t> input_of;  // training column -> this file's column (-1: a label column)
  if (has_labels_ && !separate && o_.labels_optional) {
    bool absent = false;
    if (!header.empty()) {
      for (const std::string& spec : o_.label_columns)
        absent = absent || std::find(header.begin(), header.end(), spec) == header.end();
      double v = 0;
      if (absent && parse_number(o_.label_columns[0], &v))
        absent = enc.columns > 0 && int64_t(ncols) < enc.columns;
    } else {
      absent = enc.columns > 0 && int64_t(ncols) + int64_t(o_.label_columns.size()) == enc.columns;
    }
    if (absent && header.empty()) {
      std::vector<bool> is_label(size_t(enc.columns), false);
      for (const std::string& spec : o_.label_columns)
        is_label[resolve_column(spec, {}, size_t(enc.columns), path_, "label_column")] = true;
      for (size_t c = 0, at = 0; c < is_label.size(); ++c)
        input_of.push_back(is_label[c] ? -1 : int64_t(at++));
    }
    has_labels_ = !absent;
  }
  const size_t layout_cols = input_of.empty() ? ncols : input_of.size();
  const auto column = [&](const std::string& spec, const std::string& key) {
    if (input_of.empty()) return resolve_column(spec, header, ncols, path_, key);
    const int64_t c = input_of[resolve_column(spec, {}, layout_cols, path_, key)];
    if (c < 0) throw DataError("CSV file '" + path_ + "': " + key + " '" + spec + "' names a label column");
    return size_t(c);
  };
  std::vector<bool> taken(ncols, false);
  if (has_labels_) {
    const FileHead& lh = separate ? targets_head_ : head_;
    std::vector<std::string> names;
    for (const std::string& spec : o_.label_columns) {
      const size_t c =
          resolve_column(spec, lh.header, lh.ncols, separate ? o_.targets_path : path_, "label_column");
      label_columns_.push_back(c);
      if (!separate) taken[c] = true;
      names.push_back(column_label(c, lh.header));
    }
    if (!o_.labels_optional)
      targets_ = std::make_unique<CsvTargets>(o_, separate ? o_.targets_path : path_, names);
  }
  for (const std::string& spec : o_.ignore_columns) taken[column(spec, "ignore_columns")] = true;
  std::vector<size_t> chosen;
  if (!o_.feature_columns.empty()) {
    for (const std::string& spec : o_.feature_columns) {
      const size_t c = column(spec, "feature_columns");
      if (taken[c])
        throw DataError("CSV file '" + path_ + "': feature_columns '" + spec + "' is " +
                        column_label(c, header) + ", which is also a label or ignored column");
      chosen.push_back(c);
    }
  } else {
    for (size_t c = 0; c < ncols; ++c)
      if (!taken[c]) chosen.push_back(c);
  }
  if (chosen.empty() && ncols == 1)
    throw DataError(
        path_ + ":" + std::to_string(first_line_) +
        ": found 1 column; a CSV dataset needs at least one feature column and a label column (is "
        "the delimiter '" +
        std::string(1, o_.delimiter) + "' right?)");
  if (chosen.empty())
    throw DataError("CSV file '" + path_ + "': no feature column is left of its " + std::to_string(ncols) +
                    " columns");
  std::vector<size_t> training_of(ncols);  // this file's column -> the training file's
  for (size_t c = 0; c < ncols; ++c) training_of[c] = c;
  for (size_t t = 0; t < input_of.size(); ++t)
    if (input_of[t] >= 0) training_of[size_t(input_of[t])] = t;
  for (size_t c : chosen) {
    FeatureColumn f;
    f.column = c;
    f.key = header.empty() ? std::to_string(training_of[c]) : header[c];
    features_.push_back(std::move(f));
  }
  for (const std::string& spec : o_.categorical_columns) {
    const size_t c = column(spec, "categorical_columns");
    bool found = false;
    for (FeatureColumn& f : features_)
      if (f.column == c) f.kind = FeatureColumn::Kind::categorical, found = true;
    if (!found)
      throw DataError("CSV file '" + path_ + "': categorical_columns '" + spec + "' is not a feature column");
  }
  if (enc.known) {  // the training data's kinds and categories
    for (FeatureColumn& f : features_) f.kind = FeatureColumn::Kind::numeric;
    for (const auto& entry : enc.categories) {
      // Not a structured binding: a lambda may not capture one before C++20 (clang refuses it).
      const std::string& key = entry.first;
      const auto& cats = entry.second;
      auto it = std::find_if(features_.begin(), features_.end(),
                             [&](const FeatureColumn& f) { return f.key == key; });
      if (it == features_.end())
        throw DataError("CSV file '" + path_ + "': the training data had a categorical column '" + key +
                        "', which this file's features lack");
      it->kind = FeatureColumn::Kind::categorical;
      for (size_t i = 0; i < cats.size(); ++i) it->ids.emplace(cats[i], int32_t(i));
    }
  } else if (!o_.learn) {
    for (FeatureColumn& f : features_) f.kind = FeatureColumn::Kind::numeric;
  }
}

void CsvReader::add_row(const std::vector<std::string_view>& cells) {
  if (cells.size() != head_.ncols) ragged(features_file_, head_.ncols, first_line_, cells.size());
  for (FeatureColumn& f : features_) {
    const std::string_view cell = cells[f.column];
    double v = 0;
    const bool parsed = parse_number(cell, &v);
    const bool number = parsed && std::fabs(v) <= std::numeric_limits<float>::max();
    if (f.kind == FeatureColumn::Kind::numeric && number) {
      slots_.push_back(float(v));
      continue;
    }
    if (parsed && !number && f.kind != FeatureColumn::Kind::categorical)
      throw DataError(where() + column_label(f.column, head_.header) +
                      ": expected a finite float32 number, found " + quoted(cell));
    const bool missing = !parsed && is_missing(cell);
    if (missing) {
      if (o_.fill == MissingFill::none)
        throw DataError(where() + column_label(f.column, head_.header) + ": missing value (" +
                        cell_text(cell) +
                        "); set missing: {fill: mean|zero|VALUE} on the data source to fill it");
      slots_.push_back(f.kind == FeatureColumn::Kind::categorical ? -1.f
                                                                  : std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    if (f.kind == FeatureColumn::Kind::undecided) {
      f.kind = number ? FeatureColumn::Kind::numeric : FeatureColumn::Kind::categorical;
      f.inferred = !number;
      f.first_line = features_file_.line();
      f.first_value = std::string(cell);
    } else if (f.inferred && number) {
      // A number in a column whose first value was not one: a forgotten header, or mixed values.
      throw DataError(where() + column_label(f.column, head_.header) + ": found the number '" +
                      std::string(cell) + "' in a column whose first value, '" + f.first_value +
                      "' on line " + std::to_string(f.first_line) +
                      ", is not a number (is that line a header? set header: true; or list the column in "
                      "categorical_columns to read its values as categories)");
    }
    if (f.kind == FeatureColumn::Kind::numeric) {
      if (number) {
        slots_.push_back(float(v));
        continue;
      }
      throw DataError(where() + column_label(f.column, head_.header) +
                      ": expected a finite float32 number, found " + cell_text(cell) +
                      (o_.learn && !o_.encoding.known
                           ? " (the column is numeric: its first value was a number; "
                             "list it in categorical_columns to read it as categories)"
                           : std::string()));
    }
    auto it = f.ids.find(cell);
    if (it == f.ids.end()) {
      if (o_.encoding.known || !o_.learn) {
        std::string known;
        for (const auto& [name, id] : f.ids) known += (known.empty() ? "" : ", ") + name;
        throw DataError(where() + column_label(f.column, head_.header) + ": unseen category '" +
                        std::string(cell) + "' (the training data's categories: " + known + ")");
      }
      it = f.ids.emplace(std::string(cell), int32_t(f.order.size())).first;
      f.order.emplace_back(cell);
    }
    slots_.push_back(float(it->second));
  }
  if (!targets_) return;
  if (targets_file_) {
    if (!targets_head_.pending && !targets_file_->next(&target_cells_))
      throw DataError(where() + "this row has no target row: '" + o_.targets_path + "' ends on line " +
                      std::to_string(targets_file_->line()));
    targets_head_.pending = false;
    if (target_cells_.size() != targets_head_.ncols)
      ragged(*targets_file_, targets_head_.ncols, targets_first_line_, target_cells_.size());
  }
  const std::vector<std::string_view>& from = targets_file_ ? target_cells_ : cells;
  label_cells_.clear();
  for (size_t c : label_columns_) label_cells_.push_back(from[c]);
  const CsvRecords& at = targets_file_ ? *targets_file_ : features_file_;
  targets_->add(label_cells_, at.path() + ":" + std::to_string(at.line()) + ": ");
}

Dataset CsvReader::read(CsvEncoding* learned) {
  if (o_.delimiter == '"' || o_.delimiter == '\n' || o_.delimiter == '\r')
    throw DataError("CSV file '" + path_ + "': the delimiter cannot be a quote or a line end");
  if (!o_.learn && !o_.encoding.known && o_.standardize)
    throw DataError("CSV file '" + path_ +
                    "': standardize needs the training data's statistics, which this run did not record: "
                    "predict with the run directory (trainer predict RUN)");
  std::vector<std::string_view> cells;
  head_ = read_head(features_file_, &cells, o_);
  first_line_ = features_file_.line();
  if (!o_.targets_path.empty() && !o_.label_columns.empty() && !o_.labels_optional) {
    targets_file_ = std::make_unique<CsvRecords>(std::make_unique<DataFile>(o_.targets_path), o_.delimiter,
                                                 o_.whitespace);
    targets_head_ = read_head(*targets_file_, &target_cells_, o_);
    targets_first_line_ = targets_file_->line();
  }
  resolve_columns();
  const size_t width = features_.size();
  if (head_.pending) {
    add_row(cells);
    ++rows_;
  }
  while (features_file_.next(&cells)) {
    add_row(cells);
    if (++rows_ == 1024) {  // size the samples from the bytes per row so far
      const double per_row = double(features_file_.bytes_read()) / double(rows_);
      const double expected = double(features_file_.size_hint()) / std::max(per_row, 1.0) * 1.02 + 1024;
      if (expected * double(width) < 1e11) slots_.reserve(size_t(expected) * width);
    }
  }
  if (targets_file_ && targets_file_->next(&target_cells_))
    throw DataError(o_.targets_path + ":" + std::to_string(targets_file_->line()) +
                    ": a target row beyond the last row of '" + path_ + "' (" + std::to_string(rows_) +
                    " rows)");
  if (rows_ == 0) throw DataError("CSV file '" + path_ + "' has no data rows");
  Dataset d;
  d.name = path_;
  d.dtype = SampleDtype::f32;
  // The targets first: which rows the statistics come from may depend on them (a split).
  if (targets_)
    targets_->finish(&d);
  else
    d.labels.assign(size_t(rows_), 0);
  finish(&d);
  if (learned) *learned = enc_;
  return d;
}

void CsvReader::finish(Dataset* d) {
  const CsvEncoding& given = o_.encoding;
  enc_ = given;
  enc_.known = true;
  if (!given.known) {
    enc_.columns = int64_t(head_.ncols);
    enc_.column_names = head_.header;
    enc_.categories.clear();
  }
  // Categories sorted; the ids so far were in order of appearance.
  const size_t F = features_.size();
  std::vector<std::vector<float>> remap(F);
  std::vector<size_t> numeric;  // feature slots of the numeric columns
  int64_t width = 0;
  for (size_t j = 0; j < F; ++j) {
    FeatureColumn& f = features_[j];
    if (f.kind != FeatureColumn::Kind::categorical) {
      numeric.push_back(j);
      ++width;
      continue;
    }
    if (!given.known) {
      std::vector<std::string> sorted = f.order;
      std::sort(sorted.begin(), sorted.end());
      for (const std::string& name : f.order)
        remap[j].push_back(float(std::lower_bound(sorted.begin(), sorted.end(), name) - sorted.begin()));
      enc_.categories.emplace_back(f.key, std::move(sorted));
      width += int64_t(f.order.size());
    } else {
      width += int64_t(f.ids.size());
    }
  }
  if (!given.known)
    for (size_t j = 0; j < F; ++j)
      if (!remap[j].empty())
        for (int64_t r = 0; r < rows_; ++r) {
          float& s = slots_[size_t(r) * F + j];
          if (s >= 0) s = remap[j][size_t(s)];
        }
  const size_t N = numeric.size();
  // The rows the statistics come from (all, or a split's training part).
  std::vector<bool> counted;
  if (o_.statistics_rows && !given.known) counted = o_.statistics_rows(*d);
  if (!counted.empty() && counted.size() != size_t(rows_))
    throw InternalError("read_csv: statistics_rows flags " + std::to_string(counted.size()) + " rows of " +
                        std::to_string(rows_));
  const auto counts = [&](int64_t r) { return counted.empty() || counted[size_t(r)]; };
  int64_t S = 0;
  for (int64_t r = 0; r < rows_; ++r) S += counts(r) ? 1 : 0;
  if (S == 0) throw InternalError("read_csv: no row to take statistics from");
  const auto check_count = [&](const std::vector<double>& v, const char* what) {
    if (v.size() != N)
      throw DataError("CSV file '" + path_ + "': the training data had " + std::to_string(v.size()) +
                      " numeric feature columns (" + what + "), this file has " + std::to_string(N));
  };
  // Missing cells (NaN slots): the fill of their column.
  if (o_.fill != MissingFill::none) {
    if (given.known && o_.fill == MissingFill::mean) {
      check_count(given.fill, "missing.values");
    } else {
      enc_.fill.assign(N, o_.fill == MissingFill::value ? o_.fill_value : 0.0);
      if (o_.fill == MissingFill::mean)
        for (size_t k = 0; k < N; ++k) {
          double sum = 0;
          int64_t count = 0;
          for (int64_t r = 0; r < rows_; ++r) {
            const float v = slots_[size_t(r) * F + numeric[k]];
            if (counts(r) && !std::isnan(v)) sum += v, ++count;
          }
          enc_.fill[k] = count ? sum / double(count) : 0.0;
        }
    }
    for (size_t k = 0; k < N; ++k)
      for (int64_t r = 0; r < rows_; ++r) {
        float& v = slots_[size_t(r) * F + numeric[k]];
        if (std::isnan(v)) v = float(enc_.fill[k]);
      }
  } else {
    enc_.fill.clear();
  }
  if (o_.standardize) {
    if (given.known && !given.mean.empty()) {
      check_count(given.mean, "standardize.mean");
    } else {
      enc_.mean.assign(N, 0.0);
      enc_.std.assign(N, 1.0);
      for (size_t k = 0; k < N; ++k) {
        double sum = 0, sq = 0;
        for (int64_t r = 0; r < rows_; ++r)
          if (counts(r)) sum += slots_[size_t(r) * F + numeric[k]];
        const double mean = sum / double(S);
        for (int64_t r = 0; r < rows_; ++r) {
          if (!counts(r)) continue;
          const double x = slots_[size_t(r) * F + numeric[k]] - mean;
          sq += x * x;
        }
        const double sd = std::sqrt(sq / double(S));
        enc_.mean[k] = mean;
        enc_.std[k] = sd > 0 ? sd : 1.0;
      }
    }
    for (size_t k = 0; k < N; ++k) {
      const float mean = float(enc_.mean[k]), inv = float(1.0 / enc_.std[k]);
      for (int64_t r = 0; r < rows_; ++r) {
        float& v = slots_[size_t(r) * F + numeric[k]];
        v = (v - mean) * inv;
      }
    }
  } else {
    enc_.mean.clear();
    enc_.std.clear();
  }
  d->sample_shape = Shape{width};
  if (int64_t(F) == width) {  // no categorical column: the slots are the samples
    d->f32 = std::move(slots_);
    return;
  }
  d->f32.assign(size_t(rows_ * width), 0.f);
  for (int64_t r = 0; r < rows_; ++r) {
    float* out = d->f32.data() + r * width;
    const float* in = slots_.data() + size_t(r) * F;
    for (size_t j = 0; j < F; ++j) {
      if (features_[j].kind != FeatureColumn::Kind::categorical) {
        *out++ = in[j];
        continue;
      }
      const int64_t K = int64_t(given.known ? features_[j].ids.size() : features_[j].order.size());
      if (in[j] >= 0) out[int64_t(in[j])] = 1.f;  // a missing category (-1): all zeros
      out += K;
    }
  }
  slots_ = {};
}

}  // namespace

Dataset read_csv(const std::string& path, const CsvOptions& options, CsvEncoding* learned) {
  CsvReader reader(path, options);
  return reader.read(learned);
}

}  // namespace trainer
