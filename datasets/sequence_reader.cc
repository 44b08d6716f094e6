// read_sequences: pass 1 parses every line into one flat token array plus per-line offsets
// (maxlen=0 needs the longest length before anything is padded); pass 2 pads each sequence
// straight into the dataset's storage.
#include "datasets/sequence_reader.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <string_view>

#include "datasets/file_bytes.h"
#include "lib/core/error.h"
#include "lib/core/printable.h"

namespace trainer {
namespace {

constexpr int64_t kMaxToken = int64_t(1) << 24;  // largest id float32 holds exactly (with all below)

// Writes seq[0..len) padded/truncated to maxlen into out[0..maxlen).
void pad_into(const int64_t* seq, int64_t len, int64_t maxlen, bool pad_pre, bool trunc_pre, float* out) {
  const int64_t keep = std::min(len, maxlen);
  const int64_t* from = trunc_pre ? seq + (len - keep) : seq;
  float* to = pad_pre ? out + (maxlen - keep) : out;
  std::fill(out, out + maxlen, 0.0f);
  for (int64_t i = 0; i < keep; ++i) to[i] = static_cast<float>(from[i]);
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

}  // namespace

std::vector<float> pad_sequence(const std::vector<int64_t>& seq, int64_t maxlen, bool pad_pre,
                                bool trunc_pre) {
  if (maxlen < 0) throw DataError("pad_sequence: maxlen must be >= 0, got " + std::to_string(maxlen));
  std::vector<float> out(static_cast<size_t>(maxlen));
  pad_into(seq.data(), static_cast<int64_t>(seq.size()), maxlen, pad_pre, trunc_pre, out.data());
  return out;
}

Dataset read_sequences(const std::string& path, const SequenceOptions& o) {
  const std::string file = "sequence file '" + path + "'";
  if (o.num_classes < 1) throw DataError(file + ": num_classes must be >= 1");
  if (o.maxlen < 0)
    throw DataError(file + ": maxlen must be >= 0 (0 = longest sequence), got " + std::to_string(o.maxlen));
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());

  Dataset ds;
  ds.name = path;
  ds.dtype = SampleDtype::f32;
  ds.num_classes = o.num_classes;
  std::vector<int64_t> tokens;
  std::vector<size_t> offsets{0};  // sequence i is tokens[offsets[i], offsets[i+1])
  int64_t longest = 0;
  for (size_t line_no = 1; !text.empty(); ++line_no) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    const auto where = [&] { return path + ":" + std::to_string(line_no) + ": "; };
    int64_t field = 0;  // 0 = label, then token positions 1, 2, ...
    for (size_t pos = 0;;) {
      while (pos < line.size() && is_space(line[pos])) ++pos;
      if (pos == line.size()) break;
      size_t end = pos;
      while (end < line.size() && !is_space(line[end])) ++end;
      const std::string_view word = line.substr(pos, end - pos);
      pos = end;
      int64_t v = 0;
      const auto r = std::from_chars(word.data(), word.data() + word.size(), v);
      const bool is_int = r.ec == std::errc() && r.ptr == word.data() + word.size();
      if (field == 0) {
        if (!is_int || v < 0 || v >= o.num_classes)
          throw DataError(where() + "label must be an integer in 0.." + std::to_string(o.num_classes - 1) +
                          ", found " + quoted(word));
        ds.labels.push_back(static_cast<int32_t>(v));
      } else {
        if (!is_int || v < 0 || v > kMaxToken)
          throw DataError(where() + "token " + std::to_string(field) + " must be an integer id in 0.." +
                          std::to_string(kMaxToken) + ", found " + quoted(word));
        tokens.push_back(v);
      }
      ++field;
    }
    if (field == 0) continue;  // blank line
    offsets.push_back(tokens.size());
    longest = std::max<int64_t>(longest, field - 1);
  }
  if (ds.labels.empty()) throw DataError(file + " has no samples (expected lines of 'label tok tok ...')");
  const int64_t maxlen = o.maxlen > 0 ? o.maxlen : longest;
  if (maxlen == 0)
    throw DataError(file + ": every sequence is empty, so maxlen=0 (longest) gives no features");

  // maxlen x samples can be far more than the file (one long line pads every short one).
  const uint64_t samples = ds.labels.size();
  if (uint64_t(maxlen) > std::numeric_limits<uint64_t>::max() / sizeof(float) / samples)
    throw DataError(file + ": " + std::to_string(samples) + " sequences of maxlen " + std::to_string(maxlen) +
                    " describe more data than any machine can hold");
  check_fits_in_memory(path, samples * uint64_t(maxlen) * sizeof(float),
                       std::to_string(samples) + " sequences padded to maxlen " + std::to_string(maxlen));
  ds.sample_shape = Shape{maxlen};
  ds.f32.resize(ds.labels.size() * static_cast<size_t>(maxlen));
  for (size_t i = 0; i + 1 < offsets.size(); ++i)
    pad_into(tokens.data() + offsets[i], static_cast<int64_t>(offsets[i + 1] - offsets[i]), maxlen, o.pad_pre,
             o.trunc_pre, ds.f32.data() + i * maxlen);
  return ds;
}

}  // namespace trainer
