#include "datasets/csv_records.h"

#include <algorithm>
#include <cstring>

#include "datasets/file_bytes.h"
#include "lib/core/error.h"
#include "lib/core/printable.h"

namespace trainer {
namespace {

constexpr size_t kChunk = size_t(4) << 20;  // bytes read per refill

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

}  // namespace

CsvRecords::CsvRecords(std::string_view text, char delimiter, std::string path, bool whitespace)
    : text_(text), delimiter_(delimiter), whitespace_(whitespace), path_(std::move(path)) {
  if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;
  bom_checked_ = true;
}

CsvRecords::CsvRecords(std::unique_ptr<DataFile> file, char delimiter, bool whitespace)
    : delimiter_(delimiter),
      whitespace_(whitespace),
      final_(false),
      path_(file->path()),
      file_(std::move(file)) {}

CsvRecords::~CsvRecords() = default;

std::string CsvRecords::where(size_t line) const { return path_ + ":" + std::to_string(line) + ": "; }

uint64_t CsvRecords::bytes_read() const { return file_ ? file_->position() - (text_.size() - pos_) : pos_; }

uint64_t CsvRecords::size_hint() const { return file_ ? file_->content_size_hint() : text_.size(); }

bool CsvRecords::refill() {
  if (!file_ || final_) return false;
  // Keep the unparsed tail [pos_, end) at the front; grow when one record fills the whole buffer.
  const size_t keep = text_.size() - pos_;
  if (keep > 0) std::memmove(buffer_.data(), buffer_.data() + pos_, keep);
  if (buffer_.size() < kChunk)
    buffer_.resize(kChunk);
  else if (keep > buffer_.size() / 2)
    buffer_.resize(buffer_.size() * 2);
  const size_t got = file_->read(buffer_.data() + keep, buffer_.size() - keep);
  text_ = std::string_view(buffer_.data(), keep + got);
  pos_ = 0;
  if (got < buffer_.size() - keep) final_ = true;  // DataFile::read is short only at the end
  if (!bom_checked_ && (final_ || text_.size() >= 3)) {
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;
    bom_checked_ = true;
  }
  return true;
}

bool CsvRecords::next(std::vector<std::string_view>* fields) {
  if (file_ && text_.empty() && !final_) refill();
  for (;;) {
    const size_t pos = pos_, line = line_;
    try {
      return parse_next(fields);
    } catch (const NeedMore&) {
      pos_ = pos;
      line_ = line;
      refill();
    }
  }
}

// pos_ is at the opening quote; returns the field's text without its quotes, '""' made '"'.
std::string_view CsvRecords::read_quoted(size_t column) {
  const size_t open_line = line_;
  const size_t start = ++pos_;
  bool doubled = false;
  for (;;) {
    const size_t q = text_.find('"', pos_);
    if (q == std::string_view::npos) {
      at_end(text_.size());  // more bytes may close it
      throw DataError(where(open_line) + "column " + std::to_string(column) +
                      ": the quoted field that starts here is never closed (a quote inside a quoted "
                      "field is written twice: \"\")");
    }
    line_ += size_t(std::count(text_.begin() + long(pos_), text_.begin() + long(q), '\n'));
    if (!at_end(q + 1) && text_[q + 1] == '"') {
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

bool CsvRecords::parse_next(std::vector<std::string_view>* fields) {
  // Blanks around fields; never the delimiter itself (a tab-separated file), unless whitespace.
  const auto blank = [&](char c) { return is_blank(c) && (whitespace_ || c != delimiter_); };
  for (;;) {
    // A blank line (spaces, tabs, "\r" only) is no record.
    size_t ahead = pos_;
    while (!at_end(ahead) && is_blank(text_[ahead])) ++ahead;
    if (at_end(ahead)) {
      pos_ = ahead;
      return false;
    }
    if (text_[ahead] == '\n') {
      pos_ = ahead + 1;
      ++line_;
      continue;
    }
    fields->clear();
    unescaped_.clear();
    record_line_ = line_;
    for (size_t column = 1;; ++column) {
      while (!at_end(pos_) && blank(text_[pos_]) && text_[pos_] != '\r') ++pos_;
      if (!at_end(pos_) && text_[pos_] == '"') {
        fields->push_back(read_quoted(column));
        while (!at_end(pos_) && blank(text_[pos_])) ++pos_;
        if (!record_end(pos_) && !whitespace_ && text_[pos_] != delimiter_)
          throw DataError(where(line_) + "column " + std::to_string(column) + ": unexpected " +
                          quoted(std::string(1, text_[pos_])) +
                          " after the closing quote of a quoted field (a quote inside a quoted field is "
                          "written twice: \"\")");
      } else if (whitespace_) {
        const size_t start = pos_;
        while (!record_end(pos_) && !is_blank(text_[pos_])) ++pos_;
        fields->push_back(text_.substr(start, pos_ - start));
      } else {
        const size_t start = pos_;
        while (!record_end(pos_) && text_[pos_] != delimiter_) ++pos_;
        size_t end = pos_;
        while (end > start && blank(text_[end - 1])) --end;
        fields->push_back(text_.substr(start, end - start));
      }
      if (whitespace_) {
        while (!record_end(pos_) && is_blank(text_[pos_])) ++pos_;
        if (record_end(pos_)) break;
        continue;
      }
      if (record_end(pos_)) break;
      ++pos_;  // the delimiter
    }
    if (!at_end(pos_)) {  // the "\n"
      ++pos_;
      ++line_;
    }
    return true;
  }
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
