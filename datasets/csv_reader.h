// Numeric CSV reader: one sample per row, every column a number, one of them the class label
// (or none: the inputs of `trainer predict`). Records and fields follow RFC 4180 as pandas
// writes them (datasets/csv_records.h): quoted fields, doubled quotes, delimiters and newlines
// inside quotes, "\r\n". Blank lines are skipped, a UTF-8 BOM is accepted, and the file may be
// gzip-compressed.
#pragma once

#include <string>

#include "datasets/dataset.h"

namespace trainer {

struct CsvOptions {
  bool has_header = false;
  // The label column: a header name (when has_header and a header cell matches), else a 0-based
  // index; negative indexes count from the end ("-1" = last column, the default).
  std::string label_column = "-1";
  char delimiter = ',';
  int num_classes = 0;  // labels must be integers in [0, num_classes); required (>= 1)
  // The first record is a header when any of its fields is not a number (has_header is ignored).
  bool detect_header = false;
  // false: every column is a feature and every label is 0 (label_column, num_classes unused).
  bool has_label = true;
};

// f32 dataset, sample_shape (F) with F = columns - 1 (columns without a label), features in file
// column order (label column removed). Labels may be written as integers or integral floats ("3", "3.0").
// Throws DataError naming file:line and the 1-based column for bad cells and ragged rows.
Dataset read_csv(const std::string& path, const CsvOptions& options);

}  // namespace trainer
