// The cell-level rules the CSV reader shares between features and targets: numbers (std::from_chars,
// locale-independent), missing-value markers, and columns named by header name or index.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace trainer {

// Parses a whole cell (an optional leading '+') as a finite double; false when it is not one.
bool parse_number(std::string_view cell, double* out);

// "", NA, N/A, n/a, NaN, nan, -nan, NULL, null, None, #N/A, <NA> (pandas' usual markers).
bool is_missing(std::string_view cell);

// The 0-based column that `spec` names among `ncols`: a header name (when `header` is not empty
// and a name matches), else an integer index, negative from the end. Throws DataError naming
// `path`, the option `key` and the header's names when it names none.
size_t resolve_column(const std::string& spec, const std::vector<std::string>& header, size_t ncols,
                      const std::string& path, const std::string& key);

// "column 3 ('petal_width')" (1-based), or "column 3" without a header.
std::string column_label(size_t c, const std::vector<std::string>& header);

}  // namespace trainer
