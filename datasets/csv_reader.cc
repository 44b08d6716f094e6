// read_csv: one pass over the file's bytes with CsvRecords (fields are views into the bytes, no
// per-cell allocation); numbers are parsed with std::from_chars, which is locale-independent. The
// column count is fixed by the first record (the header when there is one).
#include "datasets/csv_reader.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include "datasets/csv_records.h"
#include "datasets/file_bytes.h"
#include "lib/core/error.h"
#include "lib/core/printable.h"

namespace trainer {
namespace {

// Parses a whole cell as a finite double; false when it is not one.
bool parse_number(std::string_view cell, double* out) {
  if (!cell.empty() && cell.front() == '+') cell.remove_prefix(1);
  const char* end = cell.data() + cell.size();
  const auto r = std::from_chars(cell.data(), end, *out);
  return !cell.empty() && r.ec == std::errc() && r.ptr == end && std::isfinite(*out);
}

// Index of the label column among `ncols` columns.
size_t resolve_label_column(const std::string& path, const CsvOptions& o,
                            const std::vector<std::string_view>& header, size_t ncols) {
  if (o.has_header) {
    for (size_t c = 0; c < header.size(); ++c)
      if (header[c] == o.label_column) return c;
  }
  long long idx = 0;
  const char* end = o.label_column.data() + o.label_column.size();
  const auto r = std::from_chars(o.label_column.data(), end, idx);
  if (o.label_column.empty() || r.ec != std::errc() || r.ptr != end) {
    std::string msg = "CSV file '" + path + "': label_column '" + o.label_column + "' ";
    if (!o.has_header) throw DataError(msg + "must be a column index when the file has no header");
    msg += "is neither a header name nor a column index; header columns are:";
    for (std::string_view h : header) msg += " " + quoted(h);
    throw DataError(msg);
  }
  const long long n = static_cast<long long>(ncols);
  if (idx < -n || idx >= n)
    throw DataError("CSV file '" + path + "': label_column " + o.label_column + " is out of range for " +
                    std::to_string(ncols) + " columns (allowed " + std::to_string(-n) + ".." +
                    std::to_string(n - 1) + ")");
  return static_cast<size_t>(idx < 0 ? idx + n : idx);
}

}  // namespace

Dataset read_csv(const std::string& path, const CsvOptions& o) {
  if (o.has_label && o.num_classes < 1) throw DataError("CSV file '" + path + "': num_classes must be >= 1");
  if (o.delimiter == '"' || o.delimiter == '\n' || o.delimiter == '\r')
    throw DataError("CSV file '" + path + "': the delimiter cannot be a quote or a line end");
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  CsvRecords records(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), o.delimiter,
                     path);

  Dataset ds;
  ds.name = path;
  ds.dtype = SampleDtype::f32;
  ds.num_classes = o.has_label ? o.num_classes : 0;
  size_t ncols = 0, label_col = SIZE_MAX, first_line = 0;
  std::vector<std::string_view> cells;
  std::vector<std::string> names;  // "column 3 ('petal_width')" when there is a header
  const auto where = [&] { return path + ":" + std::to_string(records.line()) + ": "; };
  const auto column = [&](size_t c) {
    std::string s = "column " + std::to_string(c + 1);
    return names.empty() ? s : s + " (" + quoted(names[c]) + ")";
  };
  while (records.next(&cells)) {
    if (ncols == 0) {  // the first record fixes the layout
      ncols = cells.size();
      first_line = records.line();
      bool header = o.has_header;
      if (o.detect_header) {
        header = false;
        double v = 0;
        for (std::string_view c : cells) header = header || !parse_number(c, &v);
      }
      if (o.has_label && ncols < 2)
        throw DataError(where() +
                        "found 1 column; a CSV dataset needs at least one feature column and a label "
                        "column (is the delimiter '" +
                        std::string(1, o.delimiter) + "' right?)");
      CsvOptions named = o;
      named.has_header = header;
      if (o.has_label) label_col = resolve_label_column(path, named, cells, ncols);
      ds.sample_shape = Shape{static_cast<int64_t>(o.has_label ? ncols - 1 : ncols)};
      if (header) {
        names.assign(cells.begin(), cells.end());
        continue;
      }
    }
    if (cells.size() != ncols)
      throw DataError(where() + "expected " + std::to_string(ncols) + " columns (as on line " +
                      std::to_string(first_line) + "), found " + std::to_string(cells.size()));
    for (size_t c = 0; c < ncols; ++c) {
      double v = 0;
      const bool ok = parse_number(cells[c], &v);
      if (c == label_col) {
        if (!ok || v != std::floor(v) || v < 0 || v >= o.num_classes)
          throw DataError(where() + column(c) + " (label): expected an integer in 0.." +
                          std::to_string(o.num_classes - 1) + ", found " + quoted(cells[c]));
        ds.labels.push_back(static_cast<int32_t>(v));
      } else {
        if (!ok || std::fabs(v) > std::numeric_limits<float>::max())
          throw DataError(where() + column(c) + ": expected a finite float32 number, found " +
                          (cells[c].empty() ? std::string("an empty cell") : quoted(cells[c])));
        ds.f32.push_back(static_cast<float>(v));
      }
    }
    if (!o.has_label) ds.labels.push_back(0);
  }
  if (ds.labels.empty()) throw DataError("CSV file '" + path + "' has no data rows");
  return ds;
}

}  // namespace trainer
