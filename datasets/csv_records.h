// CsvRecords: splits CSV text into records and fields by RFC 4180, as pandas' to_csv writes it.
//
//   - Records end at "\n" or "\r\n" (a last record may lack one).
//   - A field that starts with '"' (after optional spaces) is quoted: it runs to the next lone '"',
//     may hold delimiters, "\r" and "\n", and writes a '"' as '""'. Only spaces may follow its
//     closing quote before the delimiter or the end of the record.
//   - Unquoted fields are trimmed of spaces and tabs; a '"' inside one is kept as it is.
//   - A record that is empty or only blanks is skipped (pandas' skip_blank_lines).
//   - Whitespace-separated text (`whitespace`, pandas' sep=r"\s+"): any run of spaces and tabs
//     separates fields, and blanks at the start and end of a record are no fields.
// The fields of one record are views into the text, or, for quoted fields with doubled quotes,
// into storage owned by the reader; they stay valid until the next call of next().
//
// From a file, the text is streamed: the (gunzipped) bytes are read in chunks of 4 MiB, and a
// record cut by a chunk's end is parsed again once the next chunk is in, so memory holds one
// chunk (or the longest record) whatever the file's size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace trainer {

class DataFile;

class CsvRecords {
 public:
  // The whole text in memory. path: for messages only. A UTF-8 byte order mark at the start of
  // `text` is skipped.
  CsvRecords(std::string_view text, char delimiter, std::string path, bool whitespace = false);
  // The content of an open data file (gunzipped when gzip-compressed; datasets/file_bytes.h),
  // streamed: CsvRecords(std::make_unique<DataFile>(path), ',').
  CsvRecords(std::unique_ptr<DataFile> file, char delimiter, bool whitespace = false);
  ~CsvRecords();
  CsvRecords(const CsvRecords&) = delete;
  CsvRecords& operator=(const CsvRecords&) = delete;

  // The next non-blank record's fields; false at the end of the text. Throws DataError naming
  // path:line (and the 1-based column) for a quoted field that is never closed or is followed by
  // something other than the delimiter.
  bool next(std::vector<std::string_view>* fields);
  // The line on which the record last returned by next() starts (1-based).
  size_t line() const { return record_line_; }
  const std::string& path() const { return path_; }
  // Content bytes consumed so far, and a guess of the content's size (for sizing buffers).
  uint64_t bytes_read() const;
  uint64_t size_hint() const;

 private:
  struct NeedMore {};  // a record runs past the bytes read so far (streaming only)
  bool parse_next(std::vector<std::string_view>* fields);
  std::string_view read_quoted(size_t column);
  // True when `at` is the end of the text; throws NeedMore when more bytes may follow.
  bool at_end(size_t at) const {
    if (at < text_.size()) return false;
    if (!final_) throw NeedMore{};
    return true;
  }
  bool record_end(size_t at) const { return at_end(at) || text_[at] == '\n'; }
  bool refill();  // keeps the bytes from pos_ on, reads more; false at the end of the file
  std::string where(size_t line) const;

  std::string_view text_;
  size_t pos_ = 0;
  size_t line_ = 1, record_line_ = 0;
  char delimiter_;
  bool whitespace_;
  bool final_ = true;  // text_ runs to the end of the content
  std::string path_;
  std::deque<std::string> unescaped_;  // quoted fields with '""', for the current record
  std::unique_ptr<DataFile> file_;     // streaming: the source of buffer_
  std::vector<char> buffer_;
  bool bom_checked_ = false;
};

// A field as RFC 4180 writes it: quoted (quotes doubled) when it holds the delimiter, a quote,
// "\r" or "\n", or starts or ends with a blank; else as it is.
std::string csv_field(std::string_view text, char delimiter = ',');

}  // namespace trainer
