#include "datasets/csv_targets.h"

#include <algorithm>
#include <cmath>

#include "datasets/csv_cells.h"
#include "lib/core/error.h"
#include "lib/core/printable.h"

namespace trainer {

CsvTargets::CsvTargets(const CsvOptions& o, std::string path, std::vector<std::string> columns)
    : o_(o), path_(std::move(path)), columns_(std::move(columns)) {
  for (size_t c = 0; c < o.class_names.size(); ++c) given_.emplace(o.class_names[c], int32_t(c));
  if (!o.label_delimiter.empty() && (o.target.kind != TargetKind::values || columns_.size() != 1))
    throw DataError("CSV file '" + path_ +
                    "': label_delimiter needs one label column and a loss that takes value targets "
                    "(binary_cross_entropy: multi-label); found " +
                    std::to_string(columns_.size()) + " label column(s)");
}

std::string CsvTargets::known_names() const {
  std::string s;
  for (size_t c = 0; c < o_.class_names.size(); ++c) s += (c ? ", " : "") + o_.class_names[c];
  return s;
}

int32_t CsvTargets::discovered_id(std::string_view name) {
  auto it = seen_.find(name);
  if (it != seen_.end()) return it->second;
  const int32_t id = int32_t(seen_order_.size());
  seen_order_.emplace_back(name);
  seen_.emplace(std::string(name), id);
  return id;
}

void CsvTargets::add(const std::vector<std::string_view>& cells, const std::string& where) {
  for (size_t k = 0; k < cells.size(); ++k)
    if (is_missing(cells[k]) && o_.label_delimiter.empty())
      throw DataError(where + columns_[k] + " (target): missing value " +
                      (cells[k].empty() ? std::string("(an empty cell)") : quoted(cells[k])) +
                      "; targets are never filled: remove the row");
  if (!o_.label_delimiter.empty())
    add_list(cells[0], where);
  else if (o_.target.kind == TargetKind::values)
    add_values(cells, where);
  else
    add_class(cells[0], where);
}

void CsvTargets::add_class(std::string_view cell, const std::string& where) {
  if (!given_.empty()) {  // a name, else an integer index
    const auto it = given_.find(cell);
    double v = 0;
    const int C = o_.num_classes > 0 ? o_.num_classes : int(given_.size());
    if (it != given_.end()) {
      ids_.push_back(it->second);
    } else if (parse_number(cell, &v) && v == std::floor(v) && v >= 0 && v < C) {
      ids_.push_back(int32_t(v));
    } else {
      throw DataError(where + columns_[0] + " (label): " + quoted(cell) + " is not one of the class names (" +
                      known_names() + ") nor a class index 0.." + std::to_string(C - 1));
    }
    return;
  }
  double v = 0;
  const bool number = parse_number(cell, &v);
  if (mode_ == Mode::undecided) mode_ = number ? Mode::numeric : Mode::named;
  if (mode_ == Mode::named) {
    ids_.push_back(discovered_id(cell));
    return;
  }
  const bool in_range =
      number && v == std::floor(v) && v >= 0 && (o_.num_classes == 0 || v < o_.num_classes) && v < (1 << 24);
  if (!in_range) {
    std::string expected = o_.num_classes > 0 ? "an integer in 0.." + std::to_string(o_.num_classes - 1)
                                              : std::string("an integer class index >= 0");
    // A fraction, or a value past the classes: perhaps a regression target given to a
    // classification loss.
    std::string hint;
    if (!number)
      hint =
          " (the column's first label was a number, so its labels are class ids; string labels are mapped "
          "through data.class_names, or discovered when every label is a string)";
    else if (v != std::floor(v))
      hint =
          " (class labels are integers; a column of values to predict needs a regression loss: mse, mae or "
          "huber)";
    else if (v >= 0)
      hint =
          " (past the last class; if the column holds values to predict rather than classes, use a "
          "regression "
          "loss: mse, mae or huber)";
    throw DataError(where + columns_[0] + " (label): expected " + expected + ", found " + quoted(cell) +
                    hint);
  }
  ids_.push_back(int32_t(v));
}

void CsvTargets::add_values(const std::vector<std::string_view>& cells, const std::string& where) {
  for (size_t k = 0; k < cells.size(); ++k) {
    double v = 0;
    if (parse_number(cells[k], &v) && std::fabs(v) <= 3.4e38) {
      values_.push_back(float(v));
      continue;
    }
    const auto it = given_.find(cells[k]);
    if (cells.size() == 1 && it != given_.end()) {  // binary labels written as names
      values_.push_back(float(it->second));
      continue;
    }
    throw DataError(where + columns_[k] +
                    " (target): expected a number (the loss takes float targets), found " + quoted(cells[k]) +
                    (given_.empty() ? std::string()
                                    : "; it is not one of the class names either (" + known_names() + ")"));
  }
}

void CsvTargets::add_list(std::string_view cell, const std::string& where) {
  const std::string& sep = o_.label_delimiter;
  size_t start = 0;
  while (start <= cell.size() && !cell.empty()) {
    size_t end = cell.find(sep, start);
    if (end == std::string_view::npos) end = cell.size();
    std::string_view name = cell.substr(start, end - start);
    while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) name.remove_prefix(1);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
    start = end + sep.size();
    if (name.empty()) continue;
    if (given_.empty()) {
      ids_.push_back(discovered_id(name));
      continue;
    }
    const auto it = given_.find(name);
    if (it == given_.end())
      throw DataError(where + columns_[0] + " (labels): unknown label " + quoted(name) + " in " +
                      quoted(cell) + "; class_names: " + known_names());
    ids_.push_back(it->second);
  }
  list_ends_.push_back(int64_t(ids_.size()));
}

void CsvTargets::finish(Dataset* d) {
  // Discovered names, sorted; the ids seen so far follow them.
  std::vector<int32_t> remap(seen_order_.size());
  std::vector<std::string> names = seen_order_;
  std::sort(names.begin(), names.end());
  for (size_t i = 0; i < seen_order_.size(); ++i)
    remap[i] = int32_t(std::lower_bound(names.begin(), names.end(), seen_order_[i]) - names.begin());
  const bool discovered = !seen_order_.empty();
  if (discovered)
    for (int32_t& id : ids_) id = remap[size_t(id)];
  const std::vector<std::string>& classes = discovered ? names : o_.class_names;

  if (!o_.label_delimiter.empty()) {
    const int64_t K = int64_t(classes.size()), n = int64_t(list_ends_.size());
    if (K == 0) throw DataError("CSV file '" + path_ + "': no label in any row of " + columns_[0]);
    d->target_width = K;
    d->targets.assign(size_t(n * K), 0.f);
    int64_t at = 0;
    for (int64_t r = 0; r < n; ++r)
      for (; at < list_ends_[size_t(r)]; ++at) d->targets[size_t(r * K + ids_[size_t(at)])] = 1.f;
    d->class_names = classes;
    d->num_classes = int(K);
    return;
  }
  if (o_.target.kind == TargetKind::values) {
    d->target_width = int64_t(columns_.size());
    d->targets = std::move(values_);
    if (!o_.class_names.empty()) d->class_names = o_.class_names;
    d->num_classes = o_.num_classes;
    return;
  }
  d->labels = std::move(ids_);
  d->target_width = 0;
  if (discovered) {
    if (o_.num_classes > 0 && int64_t(names.size()) != o_.num_classes)
      throw DataError("CSV file '" + path_ + "': " + std::to_string(names.size()) + " distinct labels in " +
                      columns_[0] + " but data.num_classes is " + std::to_string(o_.num_classes) +
                      " (list the names in data.class_names, or leave data.num_classes out)");
    d->class_names = names;
    d->num_classes = o_.num_classes > 0 ? o_.num_classes : int(names.size());
  } else {
    d->class_names = o_.class_names;
    int32_t top = -1;
    for (int32_t y : d->labels) top = std::max(top, y);
    d->num_classes = o_.num_classes > 0 ? o_.num_classes : std::max<int>(int(given_.size()), top + 1);
  }
}

}  // namespace trainer
