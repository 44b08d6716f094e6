// CSV reader: one sample per row, tables as people have them.
//
// Records and fields follow RFC 4180 as pandas writes them (datasets/csv_records.h): quoted
// fields, doubled quotes, delimiters and newlines inside quotes, "\r\n", blank lines skipped, a
// UTF-8 BOM, gzip; or runs of blanks between fields (`whitespace`). The file is streamed: memory
// holds the samples and one 4 MiB chunk of text, never the whole file.
//
// Columns (by header name, or 0-based index; a negative index counts from the end):
//   label_columns     the target columns (several: multi-output regression or multi-hot labels);
//                     in `targets_path` when the targets are a file of their own, row for row
//   feature_columns   the features, in this order (empty: every other column, in file order)
//   ignore_columns    columns that are neither
//   categorical_columns  read as categories even where they look numeric
// A feature column is numeric or categorical by its first non-missing cell: a number makes it
// numeric (a later cell that is not a number is an error), anything else categorical. A
// categorical column is one-hot encoded in place, its categories sorted (byte order). An unseen
// category (not in the training data) is an error naming file:line, the column and the value, as
// Ludwig does by default: an all-zero row would be a silent guess.
//
// Targets, by what the loss takes (TargetLayout):
//   class_index  each label is a class name of `class_names` (matched first), else an integer in
//                [0, num_classes); without class_names, string labels are discovered (sorted unique
//                values, Dataset::class_names) and integers taken as they are;
//   values       each label column a float (regression, or 0/1 multi-hot columns); with
//                `label_delimiter`, one column holds a list of names ("a|b") made a multi-hot row
//                over class_names (given, or discovered); with class_names and one label column, a
//                name gives its index as a float (binary labels written as names).
//
// Missing values ("", NA, N/A, n/a, NaN, nan, NULL, null, None, #N/A, <NA>) are an error naming
// file:line, the column's name and index, unless `fill` says what they become: mean (of the
// column's training values), zero or a value; a missing category becomes an all-zero one-hot row.
// Targets are never filled. `standardize`: (x - mean) / std per numeric feature, with the training
// data's statistics (std 0 counts as 1).
//
// What is learned from the training data (categories, mean and std, fill values, column count)
// comes back in CsvEncoding; a CsvEncoding given in the options (known) is used instead, so
// validation, eval and predict encode as training did.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "datasets/dataset.h"

namespace trainer {

enum class MissingFill { none, mean, zero, value };

// What read_csv learns from training data, and takes back for other data.
struct CsvEncoding {
  bool known = false;                     // true: use these values, learn nothing
  int64_t columns = 0;                    // columns of the training (features) file
  std::vector<std::string> column_names;  // its header, when it has one
  // Per categorical feature column (its header name, or its index when there is no header): the
  // sorted categories.
  std::vector<std::pair<std::string, std::vector<std::string>>> categories;
  std::vector<double> mean, std;  // standardize: per numeric feature, in feature order
  std::vector<double> fill;       // per numeric feature: what a missing cell becomes (fill mean)
};

struct CsvOptions {
  bool has_header = false;
  // The first record is a header when any of its fields is not a number (has_header is ignored).
  bool detect_header = false;
  char delimiter = ',';
  bool whitespace = false;   // runs of spaces and tabs separate fields (delimiter ignored)
  int64_t skip_rows = 0;     // records skipped before the header or the first row (each file)
  std::string targets_path;  // non-empty: label_columns are columns of this file
  std::vector<std::string> label_columns{"-1"};  // empty: no targets (every label 0)
  std::vector<std::string> feature_columns, ignore_columns, categorical_columns;
  // The file may lack the label columns (predict): they are absent when the header lacks their
  // names, or the file has fewer columns than the training file (encoding.columns).
  bool labels_optional = false;
  TargetLayout target;  // class_index, or values (the width comes from the columns)
  int num_classes = 0;  // class_index: integer labels lie in [0, num_classes); 0: any (discovered)
  std::vector<std::string> class_names;  // given names (labels matched by name first)
  std::string label_delimiter;           // values: one label column holding a list of names
  bool standardize = false;
  // The rows that fill means and standardize statistics come from: every row when empty, else
  // those it flags, given the data with its targets read (a validation split's training part,
  // so that no statistic of a validation row reaches training: datasets/split.h).
  std::function<std::vector<bool>(const Dataset&)> statistics_rows;
  MissingFill fill = MissingFill::none;
  double fill_value = 0;  // MissingFill::value
  // false: nothing may be learned (predict): a categorical column or standardize needs a known
  // encoding.
  bool learn = true;
  CsvEncoding encoding;
};

// f32 dataset, sample_shape (F) with F the encoded features (numeric columns one value each,
// categorical columns one per category). `learned` (optional) receives the encoding used, with
// known = true. Throws DataError naming file:line, column and value for every bad cell.
Dataset read_csv(const std::string& path, const CsvOptions& options, CsvEncoding* learned = nullptr);

}  // namespace trainer
