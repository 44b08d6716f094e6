#include "datasets/csv_cells.h"

#include <charconv>
#include <cmath>

#include "lib/core/error.h"
#include "lib/core/printable.h"

namespace trainer {

bool parse_number(std::string_view cell, double* out) {
  if (!cell.empty() && cell.front() == '+') cell.remove_prefix(1);
  const char* end = cell.data() + cell.size();
  const auto r = std::from_chars(cell.data(), end, *out);
  return !cell.empty() && r.ec == std::errc() && r.ptr == end && std::isfinite(*out);
}

bool is_missing(std::string_view cell) {
  if (cell.size() > 4) return false;
  for (std::string_view m :
       {"", "NA", "N/A", "n/a", "NaN", "nan", "-nan", "NAN", "NULL", "null", "None", "#N/A", "<NA>"})
    if (cell == m) return true;
  return false;
}

std::string column_label(size_t c, const std::vector<std::string>& header) {
  std::string s = "column " + std::to_string(c + 1);
  return header.empty() ? s : s + " ('" + header[c] + "')";
}

size_t resolve_column(const std::string& spec, const std::vector<std::string>& header, size_t ncols,
                      const std::string& path, const std::string& key) {
  for (size_t c = 0; c < header.size(); ++c)
    if (header[c] == spec) return c;
  long long idx = 0;
  const char* end = spec.data() + spec.size();
  const auto r = std::from_chars(spec.data(), end, idx);
  if (spec.empty() || r.ec != std::errc() || r.ptr != end) {
    std::string msg = "CSV file '" + path + "': " + key + " " + quoted(spec) + " ";
    if (header.empty()) throw DataError(msg + "must be a column index when the file has no header");
    msg += "is neither a header name nor a column index; header columns are:";
    for (const std::string& h : header) msg += " " + quoted(h);
    throw DataError(msg);
  }
  const long long n = static_cast<long long>(ncols);
  if (idx < -n || idx >= n)
    throw DataError("CSV file '" + path + "': " + key + " " + spec + " is out of range for " +
                    std::to_string(ncols) + " columns (allowed " + std::to_string(-n) + ".." +
                    std::to_string(n - 1) + ")");
  return static_cast<size_t>(idx < 0 ? idx + n : idx);
}

}  // namespace trainer
