#include "datasets/csv_records.h"

#include <algorithm>

#include "lib/core/error.h"
#include "lib/core/printable.h"

namespace trainer {

CsvRecords::CsvRecords(std::string_view text, char delimiter, std::string path)
    : text_(text), delimiter_(delimiter), path_(std::move(path)) {
  if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;
}

std::string CsvRecords::where(size_t line) const { return path_ + ":" + std::to_string(line) + ": "; }

// pos_ is at the opening quote; returns the field's text without its quotes, '""' made '"'.
std::string_view CsvRecords::read_quoted(size_t column) {
  const size_t open_line = line_;
  const size_t start = ++pos_;
  bool doubled = false;
  for (;;) {
    const size_t q = text_.find('"', pos_);
    if (q == std::string_view::npos)
      throw DataError(where(open_line) + "column " + std::to_string(column) +
                      ": the quoted field that starts here is never closed (a quote inside a quoted "
                      "field is written twice: \"\")");
    line_ += size_t(std::count(text_.begin() + long(pos_), text_.begin() + long(q), '\n'));
    if (q + 1 < text_.size() && text_[q + 1] == '"') {
      doubled = true;
      pos_ = q + 2;
      continue;
    }
    pos_ = q + 1;
    const std::string_view raw = text_.substr(start, q - start);
    if (!doubled) return raw;
    std::string& s = unescaped_.emplace_back();
    s.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      s += raw[i];
      if (raw[i] == '"') ++i;  // the second quote of a pair
    }
    return s;
  }
}

bool CsvRecords::next(std::vector<std::string_view>* fields) {
  // Blanks around fields; never the delimiter itself (a space- or tab-separated file).
  const auto blank = [&](char c) { return (c == ' ' || c == '\t' || c == '\r') && c != delimiter_; };
  const auto record_end = [&](size_t at) { return at >= text_.size() || text_[at] == '\n'; };
  while (pos_ < text_.size()) {
    // A blank line (spaces, tabs, "\r" only) is no record.
    size_t ahead = pos_;
    while (ahead < text_.size() && (text_[ahead] == ' ' || text_[ahead] == '\t' || text_[ahead] == '\r'))
      ++ahead;
    if (record_end(ahead)) {
      pos_ = ahead + 1;
      ++line_;
      continue;
    }
    fields->clear();
    unescaped_.clear();
    record_line_ = line_;
    for (size_t column = 1;; ++column) {
      while (pos_ < text_.size() && blank(text_[pos_]) && text_[pos_] != '\r') ++pos_;
      if (pos_ < text_.size() && text_[pos_] == '"') {
        fields->push_back(read_quoted(column));
        while (pos_ < text_.size() && blank(text_[pos_])) ++pos_;
        if (!record_end(pos_) && text_[pos_] != delimiter_)
          throw DataError(where(line_) + "column " + std::to_string(column) + ": unexpected " +
                          quoted(std::string(1, text_[pos_])) +
                          " after the closing quote of a quoted field (a quote inside a quoted field is "
                          "written twice: \"\")");
      } else {
        const size_t start = pos_;
        while (!record_end(pos_) && text_[pos_] != delimiter_) ++pos_;
        size_t end = pos_;
        while (end > start && blank(text_[end - 1])) --end;
        fields->push_back(text_.substr(start, end - start));
      }
      if (record_end(pos_)) break;
      ++pos_;  // the delimiter
    }
    if (pos_ < text_.size()) {  // the "\n"
      ++pos_;
      ++line_;
    }
    return true;
  }
  return false;
}

std::string csv_field(std::string_view text, char delimiter) {
  const bool blank_edge = !text.empty() && (text.front() == ' ' || text.front() == '\t' ||
                                            text.back() == ' ' || text.back() == '\t');
  if (!blank_edge && text.find_first_of(std::string{delimiter, '"', '\r', '\n'}) == std::string_view::npos)
    return std::string(text);
  std::string out = "\"";
  for (char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace trainer
