// read_csv: one pass over the file's bytes with string_views (no per-cell allocation); numbers
// are parsed with std::from_chars, which is locale-independent. The column count is fixed by the
// first non-blank line (the header when there is one).
#include "datasets/csv_reader.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <string_view>
#include <vector>

#include "datasets/file_bytes.h"
#include "lib/core/error.h"

namespace trainer {
namespace {

std::string_view trim_cell(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return s;
}

void split_cells(std::string_view line, char delimiter, std::vector<std::string_view>* cells) {
  cells->clear();
  for (size_t start = 0;;) {
    const size_t end = line.find(delimiter, start);
    cells->push_back(trim_cell(line.substr(start, end == std::string_view::npos ? end : end - start)));
    if (end == std::string_view::npos) return;
    start = end + 1;
  }
}

bool is_blank(std::string_view s) { return s.find_first_not_of(" \t") == std::string_view::npos; }

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
    for (std::string_view h : header) msg += " '" + std::string(h) + "'";
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
  if (o.num_classes < 1) throw DataError("CSV file '" + path + "': num_classes must be >= 1");
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // UTF-8 BOM

  Dataset ds;
  ds.name = path;
  ds.dtype = SampleDtype::f32;
  ds.num_classes = o.num_classes;
  size_t ncols = 0, label_col = 0, first_line = 0;
  size_t line_no = 0;
  std::vector<std::string_view> cells;
  std::vector<std::string> names;  // "column 3 ('petal_width')" when there is a header
  const auto where = [&] { return path + ":" + std::to_string(line_no) + ": "; };
  const auto column = [&](size_t c) {
    std::string s = "column " + std::to_string(c + 1);
    return names.empty() ? s : s + " ('" + names[c] + "')";
  };
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (is_blank(line)) continue;
    split_cells(line, o.delimiter, &cells);

    if (ncols == 0) {  // first non-blank line fixes the layout
      ncols = cells.size();
      first_line = line_no;
      if (ncols < 2)
        throw DataError(where() +
                        "found 1 column; a CSV dataset needs at least one feature column and a label "
                        "column (is the delimiter '" +
                        std::string(1, o.delimiter) + "' right?)");
      label_col = resolve_label_column(path, o, cells, ncols);
      ds.sample_shape = Shape{static_cast<int64_t>(ncols - 1)};
      if (o.has_header) {
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
                          std::to_string(o.num_classes - 1) + ", found '" + std::string(cells[c]) + "'");
        ds.labels.push_back(static_cast<int32_t>(v));
      } else {
        if (!ok || std::fabs(v) > std::numeric_limits<float>::max())
          throw DataError(
              where() + column(c) + ": expected a finite float32 number, found " +
              (cells[c].empty() ? std::string("an empty cell") : "'" + std::string(cells[c]) + "'"));
        ds.f32.push_back(static_cast<float>(v));
      }
    }
  }
  if (ds.labels.empty()) throw DataError("CSV file '" + path + "' has no data rows");
  return ds;
}

}  // namespace trainer
