// CsvTargets: turns the label cells of each CSV row into the dataset's targets, as
// datasets/csv_reader.h describes (class indices by name or number, discovered class names, float
// values, multi-hot rows from a delimited list). Rows are added in order; finish() writes labels or
// targets, target_width, num_classes and class_names.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "datasets/csv_reader.h"

namespace trainer {

class CsvTargets {
 public:
  // path: the file of the labels; columns: how messages name each label column ("column 5
  // ('species')"), in label order.
  CsvTargets(const CsvOptions& o, std::string path, std::vector<std::string> columns);

  // One row's label cells (one per label column); `where` is "path:line: " for messages.
  void add(const std::vector<std::string_view>& cells, const std::string& where);
  void finish(Dataset* d);

 private:
  void add_class(std::string_view cell, const std::string& where);
  void add_values(const std::vector<std::string_view>& cells, const std::string& where);
  void add_list(std::string_view cell, const std::string& where);
  int32_t discovered_id(std::string_view name);
  std::string known_names() const;

  const CsvOptions& o_;
  std::string path_;
  std::vector<std::string> columns_;
  std::map<std::string, int32_t, std::less<>> given_;  // class_names -> index
  // Discovery: names in order of appearance; ids_ hold those ids until finish() sorts them.
  std::map<std::string, int32_t, std::less<>> seen_;
  std::vector<std::string> seen_order_;
  enum class Mode { undecided, numeric, named } mode_ = Mode::undecided;  // class_index
  std::vector<int32_t> ids_;        // class_index: per row; list: the rows' ids, concatenated
  std::vector<int64_t> list_ends_;  // list: where each row's ids end in ids_
  std::vector<float> values_;       // values: per row, one per label column
};

}  // namespace trainer
