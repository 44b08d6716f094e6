// CsvRecords: splits CSV text into records and fields by RFC 4180, as pandas' to_csv writes it.
//
//   - Records end at "\n" or "\r\n" (a last record may lack one).
//   - A field that starts with '"' (after optional spaces) is quoted: it runs to the next lone '"',
//     may hold delimiters, "\r" and "\n", and writes a '"' as '""'. Only spaces may follow its
//     closing quote before the delimiter or the end of the record.
//   - Unquoted fields are trimmed of spaces and tabs; a '"' inside one is kept as it is.
//   - A record that is empty or only blanks is skipped (pandas' skip_blank_lines).
// The fields of one record are views into the text, or, for quoted fields with doubled quotes,
// into storage owned by the reader; they stay valid until the next call of next().
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace trainer {

class CsvRecords {
 public:
  // path: for messages only. A UTF-8 byte order mark at the start of `text` is skipped.
  CsvRecords(std::string_view text, char delimiter, std::string path);

  // The next non-blank record's fields; false at the end of the text. Throws DataError naming
  // path:line (and the 1-based column) for a quoted field that is never closed or is followed by
  // something other than the delimiter.
  bool next(std::vector<std::string_view>* fields);
  // The line on which the record last returned by next() starts (1-based).
  size_t line() const { return record_line_; }

 private:
  std::string_view read_quoted(size_t column);
  std::string where(size_t line) const;

  std::string_view text_;
  size_t pos_ = 0;
  size_t line_ = 1, record_line_ = 0;
  char delimiter_;
  std::string path_;
  std::deque<std::string> unescaped_;  // quoted fields with '""', for the current record
};

// A field as RFC 4180 writes it: quoted (quotes doubled) when it holds the delimiter, a quote,
// "\r" or "\n", or starts or ends with a blank; else as it is.
std::string csv_field(std::string_view text, char delimiter = ',');

}  // namespace trainer
